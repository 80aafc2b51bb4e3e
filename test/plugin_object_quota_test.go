package test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestPluginObjectQuota has plugins create objects past their object quota
// on the real server, by children and by host calls: the creates past it
// are refused with a Forbidden Status naming the quota and counted, the
// plugin's objects stay at the quota, and it may create again once some of
// them are gone.
func TestPluginObjectQuota(t *testing.T) {
	writer, childmaker := wasmModule(t, "writer"), wasmModule(t, "childmaker")
	const quota = 5
	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-max-objects", "5"}})
	apply := func(m string) {
		t.Helper()
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s%s", err, out, errOut)
		}
	}
	kubectl := func(args ...string) string {
		out, _, _ := s.Kubectl(args...)
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, what, cond)
	}
	countNotes := func(plugin string) int {
		return strings.Count(kubectl("get", "notes", "-A", "-l", "setpoint.dev/created-by-plugin="+plugin,
			"-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`), "\n")
	}
	for _, m := range []string{strictGadgetCRD, looseGizmoCRD, noteCRD} {
		apply(m)
	}

	// Children: one gizmo asks for eight notes, five are made.
	ok(t, s, "plugin", "install", "maker", "--wasm", childmaker, "--reconcile", "gizmos", "--owns", "notes")
	var children strings.Builder
	for i := range 8 {
		if i > 0 {
			children.WriteString(",")
		}
		children.WriteString(`{"apiVersion":"example.setpoint.dev/v1","kind":"Note","metadata":{"name":"child-` + string(rune('a'+i)) + `"},"spec":{"size":"small"}}`)
	}
	patch := `{"spec":{"config":{"children":` + jsonString("["+children.String()+"]") + `}}}`
	if out, errOut, err := s.Kubectl("patch", "plugin", "maker", "--type", "merge", "-p", patch); err != nil {
		t.Fatalf("patch plugin maker: %v %s%s", err, out, errOut)
	}
	apply("apiVersion: example.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: z1, namespace: default}\nspec: {}\n")
	var cond string
	waitFor("z1's Ready to name the object quota", func() bool {
		cond = kubectl("get", "gizmo", "z1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		return strings.Contains(cond, "its object quota of 5")
	})
	if n := countNotes("maker"); n != quota {
		t.Errorf("maker has %d labelled notes, want the quota of %d", n, quota)
	}

	// Host calls: a plugin creates eight notes per reconcile; five go
	// through, the sixth is refused.
	ok(t, s, "plugin", "install", "busy", "--wasm", writer, "--reconcile", "gadgets", "--permissions", "write=notes")
	note := `{"apiVersion":"example.setpoint.dev/v1","kind":"Note","metadata":{"generateName":"made-","namespace":"default"},"spec":{"size":"small"}}`
	patch = `{"spec":{"config":{"op":"create","repeat":"8","object":` + jsonString(note) + `}}}`
	if out, errOut, err := s.Kubectl("patch", "plugin", "busy", "--type", "merge", "-p", patch); err != nil {
		t.Fatalf("patch plugin busy: %v %s%s", err, out, errOut)
	}
	apply("apiVersion: example.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {}\n")
	waitFor("g1's Ready to name the object quota", func() bool {
		cond = kubectl("get", "gadget", "g1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		return strings.Contains(cond, "its object quota of 5")
	})
	if !strings.Contains(cond, "Forbidden") && !strings.Contains(cond, "403") {
		t.Errorf("Ready message %q, want the 403 Forbidden the guest got", cond)
	}
	if n := countNotes("busy"); n != quota {
		t.Errorf("busy has %d labelled notes, want the quota of %d", n, quota)
	}
	for _, c := range []struct{ plugin, source string }{{"maker", "children"}, {"busy", "host_call"}} {
		if n := serverMetric(t, s, "setpoint_plugin_objects_quota_refused_total", `plugin="`+c.plugin+`"`, `source="`+c.source+`"`); n < 1 {
			t.Errorf("creates of %s refused by the quota = %v, want some", c.plugin, n)
		}
	}
	t.Logf("quota %d: maker holds %d children, busy %d notes; the rest refused", quota, countNotes("maker"), countNotes("busy"))

	// Deleting its notes frees the quota, once the server counts again.
	if out, errOut, err := s.Kubectl("delete", "notes", "-l", "setpoint.dev/created-by-plugin=busy"); err != nil {
		t.Fatalf("delete busy's notes: %v %s%s", err, out, errOut)
	}
	if out, errOut, err := s.Kubectl("label", "gadget", "g1", "poke=1", "--overwrite"); err != nil {
		t.Fatalf("label gadget: %v %s%s", err, out, errOut)
	}
	waitFor("busy to create again", func() bool { return countNotes("busy") > 0 })
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
