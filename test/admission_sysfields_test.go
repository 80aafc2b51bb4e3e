package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// A mutating plugin (host/testdata/guests/sysfields) that sets uid (to
// another object's), creationTimestamp, deletionTimestamp, resourceVersion
// and generation on every create and update: the server keeps its own
// values, as a create without the plugin would have them.
func TestMutatingPluginCannotSetSystemFields(t *testing.T) {
	wasm := builtModule(t, "sysfields")
	s := testserver.Start(t, testserver.Options{})
	crd, err := os.ReadFile(filepath.Join("..", "examples", "widget", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := s.KubectlInput(string(crd), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := s.KubectlInput(plWidget("other", ""), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply widget: %v\n%s%s", err, out, errOut)
	}
	otherUID, _, err := s.Kubectl("get", "widget", "other", "-o", "jsonpath={.metadata.uid}")
	if err != nil || otherUID == "" {
		t.Fatalf("uid of other: %q %v", otherUID, err)
	}
	digest := mustUpload(t, s, wasm)
	applyPlugin(t, s, pluginManifest("sysfields", digest, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE, UPDATE]
    type: Mutating
  config:
    uid: `+otherUID+`
`))
	waitPlugin(t, s, "sysfields", time.Minute, loadedWith(digest))
	// Loaded is what the replica that wrote the status saw; another may
	// not have seen the Plugin yet (docs/RATIONALE.md, "Why does a replica
	// hold the writes a new Plugin binds until it has loaded it?"), as a
	// kube-apiserver may not have seen a new webhook configuration. Each
	// server mutates a dry-run create before the test relies on it.
	for _, r := range s.Servers() {
		testsupport.Poll(t, time.Minute, "the plugin's admission on "+r.Addr, func() (bool, string) {
			out, errOut, err := r.KubectlInput(plWidget("probe", ""), "create", "--dry-run=server", "-o", "jsonpath={.metadata.labels.mutated}", "-f", "-")
			return err == nil && out == "yes", out + errOut
		})
	}

	const fields = `{.metadata.labels.mutated}|{.metadata.uid}|{.metadata.creationTimestamp}|{.metadata.deletionTimestamp}|{.metadata.generation}|{.metadata.resourceVersion}`
	get := func(name string) []string {
		t.Helper()
		out, errOut, err := s.Kubectl("get", "widget", name, "-o", "jsonpath="+fields)
		if err != nil {
			t.Fatalf("get %s: %v %s", name, err, errOut)
		}
		return strings.Split(out, "|")
	}
	before := time.Now().Add(-time.Minute)
	if out, errOut, err := s.KubectlInput(plWidget("w", ""), "create", "-f", "-"); err != nil {
		t.Fatalf("create: %v\n%s%s", err, out, errOut)
	}
	created := get("w")
	ts, err := time.Parse(time.RFC3339, created[2])
	switch {
	case created[0] != "yes":
		t.Fatalf("the plugin did not run: %q", created)
	case created[1] == otherUID || created[1] == "":
		t.Errorf("uid %q: the plugin set it (another object's is %q)", created[1], otherUID)
	case err != nil || ts.Before(before):
		t.Errorf("creationTimestamp %q: the plugin set it", created[2])
	case created[3] != "":
		t.Errorf("deletionTimestamp %q: the plugin set it", created[3])
	case created[4] != "1" || created[5] == "1":
		t.Errorf("generation %q, resourceVersion %q", created[4], created[5])
	}

	// An update of spec: generation 2, the rest as stored.
	if out, errOut, err := s.Kubectl("patch", "widget", "w", "--type=merge", "-p", `{"spec":{"size":"large"}}`); err != nil {
		t.Fatalf("patch: %v\n%s%s", err, out, errOut)
	}
	updated := get("w")
	if updated[1] != created[1] || updated[2] != created[2] || updated[3] != "" || updated[4] != "2" || updated[5] == "1" || updated[5] == created[5] {
		t.Errorf("after an update: %q, want uid and creationTimestamp of %q, no deletionTimestamp, generation 2, a new resourceVersion", updated, created)
	}
}
