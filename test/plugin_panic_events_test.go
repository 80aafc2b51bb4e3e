package test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// Repeated guest panics whose messages hold different pointers aggregate,
// on the real server, into one Warning Event on the object with a count,
// as other repeated failures do.
func TestGuestPanicsAggregateIntoOneEvent(t *testing.T) {
	faulty := wasmModule(t, "faulty")
	s := testserver.Start(t, testserver.Options{})
	if out, errOut, err := s.KubectlInput(looseGizmoCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	ok(t, s, "plugin", "install", "panicky", "--wasm", faulty, "--reconcile", "gizmos", "--config", "mode=panicptr")
	if out, errOut, err := s.KubectlInput("apiVersion: example.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: p1, namespace: default}\nspec: {}\n",
		"apply", "-f", "-"); err != nil {
		t.Fatalf("apply gizmo: %v %s%s", err, out, errOut)
	}
	var lines []string
	testsupport.Poll(t, 90*time.Second, "a panic Event counted twice", func() (bool, string) {
		out, _, _ := s.Kubectl("get", "events", "--field-selector", "involvedObject.name=p1",
			"-o", `jsonpath={range .items[*]}{.type}|{.count}|{.message}{"\n"}{end}`)
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			// The panic's own Events; the breaker's Event once the calls
			// are suspended quotes the last panic too, and is another.
			if f := strings.SplitN(l, "|", 3); len(f) == 3 && strings.HasPrefix(f[2], `reconcile: plugin "panicky" reconcile: host: guest failure: panic: bad object at`) {
				lines = append(lines, l)
			}
		}
		if len(lines) > 1 {
			return true, "" // one Event per panic: the assertion below says so
		}
		if len(lines) == 1 {
			if n, _ := strconv.Atoi(strings.Split(lines[0], "|")[1]); n >= 2 {
				return true, ""
			}
		}
		return false, "events:\n" + out
	})
	t.Logf("panic events: %q", lines)
	if len(lines) != 1 {
		t.Fatalf("%d Events for the same panic, want one counted:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.HasPrefix(lines[0], "Warning|") || !strings.Contains(lines[0], "bad object at 0x?") {
		t.Errorf("panic Event %q, want a Warning with the pointer normalised", lines[0])
	}
}
