package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// lifeWidget is a widget for the lifecycle plugin, labelled deny when deny
// is set (its admit denies those, naming its version).
func lifeWidget(name string, deny bool) string {
	labels := ""
	if deny {
		labels = "\n  labels: {deny: \"yes\"}"
	}
	return fmt.Sprintf("apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: default%s\nspec: {name: %s, size: small}\n", name, labels, name)
}

// The unsafe upgrade is gone: on the real server, upgrading a Plugin that
// reconciles and admits widgets (failurePolicy Fail) to a module that lacks
// admit, reconcile or finalize (while a widget carries its finalizer), or
// that needs more memory than the Plugin's cap, or traps in its init, is
// refused; the CLI says so and names the module that keeps serving, and the
// first module goes on admitting, reconciling and finalizing.
func TestPluginUpgradeRefusesUnsafeModules(t *testing.T) {
	v1 := wasmModule(t, "lifecyclev1")
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", writeFiles(t, map[string]string{"crd.yaml": widgetCRD})+"/crd.yaml")
	ok(t, s, "plugin", "install", "life", "--wasm", v1, "--reconcile", "widgets", "--admit", "widgets", "--operations", "CREATE", "--memory-pages", "512")
	v1Digest := getPlugin(t, s, "life").LoadedDigest

	n := 0
	// stillV1 shows that the first module still admits, reconciles and
	// finalizes.
	stillV1 := func(t *testing.T) {
		t.Helper()
		n++
		_, errOut, err := s.KubectlInput(lifeWidget(fmt.Sprintf("denied-%d", n), true), "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, `admission plugin "life" denied the request: denied by v1`) {
			t.Errorf("a widget labelled deny: %v %s, want v1's denial", err, errOut)
		}
		name := fmt.Sprintf("kept-%d", n)
		if out, errOut, err := s.KubectlInput(lifeWidget(name, false), "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
		waitWidget(t, s, name, "reconciled by v1")
		if fin, _, _ := s.Kubectl("get", "widget", name, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(fin, "setpoint.dev/life") {
			t.Errorf("widget %s carries finalizers %s, want setpoint.dev/life", name, fin)
		}
		if out, errOut, err := s.Kubectl("delete", "widget", fmt.Sprintf("kept-%d", n-1), "--ignore-not-found", "--timeout=20s"); err != nil {
			t.Errorf("delete through v1's finalize: %v\n%s%s", err, out, errOut)
		}
	}
	stillV1(t)

	for _, tc := range []struct{ name, module, says string }{
		{"missing admit", "lifecyclenoadmit", "does not export admit, which spec.admission binds"},
		{"missing reconcile", "lifecycleadmitonly", "does not export reconcile, which spec.reconcile binds"},
		{"missing finalize while widgets carry it", "lifecyclenofinalize", "does not export finalize, and 1 object of widgets.example.setpoint.dev carrying its finalizer setpoint.dev/life would never finish deleting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, s, nil, "", "plugin", "upgrade", "life", "--wasm", wasmModule(t, tc.module))
			if r.code == 0 {
				t.Fatalf("upgrade to %s succeeded:\n%s", tc.module, r.stdout)
			}
			refused := digestOfModule(builtModule(t, tc.module))
			if !strings.Contains(r.stdout, "upgraded: module "+v1Digest+" -> "+refused) {
				t.Errorf("upgrade output does not name the serving module %s and the new one %s:\n%s", v1Digest, refused, r.stdout)
			}
			for _, want := range []string{"module " + refused + " was refused and not swapped in", "MissingExport", tc.says, "module " + v1Digest + " keeps serving"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("upgrade stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			st := getPlugin(t, s, "life")
			if st.LoadedDigest != v1Digest || st.Phase != "Failed" {
				t.Errorf("status after the refused upgrade: %+v, want v1 loaded", st)
			}
			stillV1(t)
		})
	}

	t.Run("over the memory cap", func(t *testing.T) {
		// Uploaded under the default cap, where it loads; the Plugin's cap
		// is 512 pages, under which its init runs out of memory.
		grow := mustUpload(t, s, builtModule(t, "lifecyclegrow"))
		if out, errOut, err := s.Kubectl("patch", "plugin", "life", "--type=merge", "-p", `{"spec":{"module":{"digest":"`+grow+`"}}}`); err != nil {
			t.Fatalf("kubectl patch: %v\n%s%s", err, out, errOut)
		}
		st := waitPlugin(t, s, "life", 30*time.Second, func(st pluginStatus) bool {
			_, reason, _ := st.condition("Loaded")
			return st.Phase == "Failed" && reason == "InvalidModule"
		})
		if _, _, msg := st.condition("Loaded"); st.LoadedDigest != v1Digest || !strings.Contains(msg, "module "+v1Digest+" keeps serving") {
			t.Errorf("status after the refused upgrade: %+v", st)
		}
		stillV1(t)
	})

	t.Run("trap in init", func(t *testing.T) {
		r := runCLI(t, s, nil, "", "plugin", "upgrade", "life", "--wasm", wasmModule(t, "inittrap"))
		if r.code == 0 || !strings.Contains(r.stderr, "inittrap: init fails on purpose") {
			t.Errorf("upgrade to a module that traps in init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if st := getPlugin(t, s, "life"); st.LoadedDigest != v1Digest {
			t.Errorf("status after the refused upgrade: %+v", st)
		}
		stillV1(t)
	})

	t.Run("a Fail rule nothing serves refuses writes", func(t *testing.T) {
		r := runCLI(t, s, nil, "", "plugin", "install", "strict", "--wasm", wasmModule(t, "lifecyclenoadmit"), "--admit", "widgets")
		if r.code == 0 || !strings.Contains(r.stderr, "does not export admit") {
			t.Errorf("install of a module without admit for an admission binding: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		_, errOut, err := s.KubectlInput(lifeWidget("unchecked", false), "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, `admission plugin "strict" failed (failurePolicy Fail)`) || !strings.Contains(errOut, "does not export admit") {
			t.Errorf("a widget write while Plugin strict cannot serve its Fail rule: %v %s, want a refusal naming the plugin and why", err, errOut)
		}
	})
}

// waitWidget waits until the widget's status.state is state.
func waitWidget(t *testing.T, s *testserver.Server, name, state string) {
	t.Helper()
	testsupport.Poll(t, 20*time.Second, fmt.Sprintf("widget %s in state %q", name, state), func() (bool, string) {
		out, _, _ := s.Kubectl("get", "widget", name, "-o", "jsonpath={.status.state}")
		return out == state, fmt.Sprintf("state %q", out)
	})
}
