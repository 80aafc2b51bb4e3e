package test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// A Plugin whose every reconcile traps, on objects updated without pause,
// has its calls suspended by the server after a few failures: the Plugin's
// status (condition CallsSuspended), its events (`setpoint plugin
// describe`), the objects' Ready condition and /metrics say so; while it is
// suspended the plugin is called only a handful of times however often its
// objects change, and another Plugin reconciles all its objects. A fixed
// spec resumes its calls at once.
func TestFailingPluginCallsSuspendedOthersKeepTheirRate(t *testing.T) {
	faulty, v1 := builtModule(t, "faulty"), wasmModule(t, "lifecyclev1")
	s := testserver.Start(t, testserver.Options{})
	gadgetCRD := testsupport.CRD{Kind: "Gadget", Status: true, Schema: "{type: object, x-kubernetes-preserve-unknown-fields: true}"}.String()
	dir := writeFiles(t, map[string]string{"widgets.yaml": widgetCRD, "gadgets.yaml": gadgetCRD})
	ok(t, s, "apply", "-f", dir+"/widgets.yaml")
	ok(t, s, "apply", "-f", dir+"/gadgets.yaml")
	const gadgets = 4
	for i := range gadgets {
		g := fmt.Sprintf("apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: g%d, namespace: default}\nspec: {n: 0}\n", i)
		if out, errOut, err := s.KubectlInput(g, "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
	}
	d := mustUpload(t, s, faulty)
	hostile := func(mode string) string {
		return pluginManifest("hostile", d, "  reconcile:\n    for: gadgets.example.setpoint.dev\n  config:\n    mode: "+mode+"\n")
	}
	applyPlugin(t, s, hostile("trap"))

	// The hostile objects change without pause, so that the plugin is
	// called constantly.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churn int
	c := s.HTTPClient()
	defer c.CloseIdleConnections()
	mergePatch := http.Header{"Content-Type": {"application/merge-patch+json"}}
	stopChurn := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopChurn)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			code, _, err := s.DoWith(http.MethodPatch, fmt.Sprintf("/apis/example.setpoint.dev/v1/namespaces/default/gadgets/g%d", i%gadgets), s.Token,
				bytes.NewReader(fmt.Appendf(nil, `{"spec":{"n":%d}}`, i+1)), testserver.DoOptions{Header: mergePatch, Client: c})
			if err != nil {
				t.Errorf("patch gadget: %v", err)
				return
			}
			if code != http.StatusOK {
				t.Errorf("patch gadget: %d", code)
				return
			}
			churn++
			time.Sleep(20 * time.Millisecond)
		}
	})
	st := waitPlugin(t, s, "hostile", time.Minute, func(st pluginStatus) bool {
		status, _, _ := st.condition("CallsSuspended")
		return status == "True"
	})
	_, reason, msg := st.condition("CallsSuspended")
	if reason != "RepeatedFailures" || !strings.Contains(msg, "reconcile and finalize calls suspended") || !strings.Contains(msg, "out of bounds memory access") {
		t.Errorf("CallsSuspended: %s %q, want RepeatedFailures naming the calls and the last failure", reason, msg)
	}
	metric := func(series string) float64 {
		t.Helper()
		code, body, err := s.Do(http.MethodGet, "/metrics", s.Token, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", code, err)
		}
		return metricValue(string(body), series)
	}
	if v := metric(`setpoint_plugin_calls_suspended{calls="reconcile",plugin="hostile"}`); v != 1 {
		t.Errorf("setpoint_plugin_calls_suspended = %v, want 1", v)
	}
	// Meanwhile another Plugin reconciles its widgets.
	calls0 := metric(`setpoint_plugin_calls_total{plugin="hostile"}`)
	refused0 := metric(`setpoint_plugin_calls_refused_total{calls="reconcile",plugin="hostile"}`)

	ok(t, s, "plugin", "install", "quick", "--wasm", v1, "--reconcile", "widgets")
	const widgets = 8
	for i := range widgets {
		if out, errOut, err := s.KubectlInput(lifeWidget(fmt.Sprintf("w%d", i), false), "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
	}
	for i := range widgets {
		waitWidget(t, s, fmt.Sprintf("w%d", i), "reconciled by v1")
	}
	time.Sleep(time.Second) // a few more reconciles of the hostile objects
	stopChurn()
	calls := metric(`setpoint_plugin_calls_total{plugin="hostile"}`) - calls0
	refused := metric(`setpoint_plugin_calls_refused_total{calls="reconcile",plugin="hostile"}`) - refused0
	t.Logf("%d widgets reconciled by the other Plugin; meanwhile %d updates of the hostile objects, %v hostile calls, %v refused", widgets, churn, calls, refused)
	if churn < 10 || refused < 10 {
		t.Fatalf("%d updates, %v calls refused: the hostile plugin was not asked often enough to tell", churn, refused)
	}
	// The breaker lets one call through after 2 s, then 4 s, 8 s...: a
	// few calls in the time the widgets took, whatever the update rate.
	if calls > 6 {
		t.Errorf("the suspended plugin was called %v times while its objects changed %d times; want at most 6 trial calls", calls, churn)
	}

	out := ok(t, s, "plugin", "describe", "hostile")
	for _, want := range []string{"CallsSuspended", "RepeatedFailures"} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin describe lacks %q:\n%s", want, out)
		}
	}
	ready, _, _ := s.Kubectl("get", "gadget", "g0", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
	if !strings.Contains(ready, `plugin "hostile"`) || !strings.Contains(ready, "calls suspended") {
		t.Errorf("gadget g0's Ready message %q does not say the plugin's calls are suspended", ready)
	}

	// Fixed: the spec changes, calls resume at once and the objects
	// reconcile.
	applyPlugin(t, s, hostile("none"))
	waitPlugin(t, s, "hostile", time.Minute, func(st pluginStatus) bool {
		status, reason, _ := st.condition("CallsSuspended")
		return status == "False" && reason == "CallsResumed"
	})
	testsupport.Poll(t, 30*time.Second, "gadget g0 reconciled", func() (bool, string) {
		out, _, _ := s.Kubectl("get", "gadget", "g0", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", "Ready " + out
	})
	if v := metric(`setpoint_plugin_calls_suspended{calls="reconcile",plugin="hostile"}`); v != 0 {
		t.Errorf("setpoint_plugin_calls_suspended = %v after the fix, want 0", v)
	}
	out = ok(t, s, "plugin", "describe", "hostile")
	if !strings.Contains(out, "CallsResumed") {
		t.Errorf("plugin describe lacks the CallsResumed event:\n%s", out)
	}
}
