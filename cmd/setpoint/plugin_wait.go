package main

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// waitLoaded waits until the Plugin reports the module digest loaded, and
// fails at once with the server's reason when it reports a failure for it
// that waiting will not mend: the Failed phase (an invalid spec or module, a
// module without an export the spec binds, a refused upgrade) or a kind
// another Plugin reconciles. left says what became of the Plugin object; it
// ends every failure's message. On a terminal, stderr shows the wait.
func waitLoaded(ctx context.Context, c *client, name, digest string, timeout time.Duration, stdout, stderr io.Writer, left string) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	ph := startPhase(stderr, "waiting for the server to load plugin "+name)
	defer ph.end("failed")
	ri := c.dynamic.Resource(pluginGVR)
	var last string
	for {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return c.explain(err)
		}
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		loaded, _, _ := unstructured.NestedString(obj.Object, "status", "loadedDigest")
		cond := condition(obj, "Loaded")
		observed, _ := cond["observedGeneration"].(int64)
		current := observed >= obj.GetGeneration()
		reason := str(cond["reason"])
		switch {
		case phase == "Loaded" && loaded == digest && current:
			ph.end("done")
			fmt.Fprintf(stdout, "plugin.setpoint.dev/%s loaded\n", name)
			return nil
		case phase == "Failed" && current && loaded != "" && loaded != digest:
			// The server's message ends with the module that keeps serving.
			return exitError(exitInvalid, fmt.Errorf("plugin %s: module %s was refused and not swapped in: %s: %s; %s", name, digest, reason, str(cond["message"]), left))
		case phase == "Failed" && current:
			return exitError(exitInvalid, fmt.Errorf("plugin %s failed to load: %s: %s; %s", name, reason, str(cond["message"]), left))
		case reason == "ReconcileConflict" && current:
			// It would wait until the other Plugin goes, which is not
			// what the command waits for.
			return exitError(exitConflict, fmt.Errorf("plugin %s cannot reconcile: %s: %s; %s", name, reason, str(cond["message"]), left))
		}
		last = fmt.Sprintf("phase %q", phase)
		if reason != "" {
			last += fmt.Sprintf(", %s: %s", reason, str(cond["message"]))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			ph.end("timed out")
			return fmt.Errorf("plugin %s not loaded within %v (%s); %s", name, timeout, last, left)
		}
	}
}

// condition returns the status condition of the given type, or nil.
func condition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
