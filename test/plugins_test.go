package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// The plugin suite runs one server through the life of plugins: uploads,
// admission (denial, mutation, dry run, failure policies), hot swap under
// load, reconcile through a Wasm plugin, and a restart that reloads them.

const (
	modulesPath = "/apis/setpoint.dev/v1alpha1/modules"
	pluginsPath = "/apis/setpoint.dev/v1alpha1/plugins"
	widgetsPath = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"
)

// gadgetCRD is the kind of the children the test guest provisions.
var gadgetCRD = testsupport.CRD{
	Kind: "Gadget",
	Schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
`,
}.String()

// testGuestSource is a guest built by the test: its admit export does what
// config "mode" says (loop: spin; panic; dryrun: annotate the object with
// whether the request is a dry run), and its reconcile export provisions one
// Gadget per Widget and reports its state.
const testGuestSource = `package main

import (
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Reconcile: reconcile, Admit: admit, Finalize: finalize}) }

func finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return &abi.FinalizeResponse{Done: true, Events: []abi.Event{{Type: "Normal", Reason: "GadgetReleased", Message: "released " + req.Object.String("metadata", "name")}}}, nil
}

var spins int

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	switch req.Config["mode"] {
	case "loop":
		for {
			spins++
		}
	case "panic":
		var m map[string]int
		m["boom"]++
	case "dryrun":
		v := "false"
		if req.DryRun {
			v = "true"
		}
		var op abi.RawJSON
		if req.Object.Has("metadata", "annotations") {
			op = abi.NewObject(nil).Str("op", "add").Str("path", "/metadata/annotations/test.setpoint.dev~1dry-run").Str("value", v).Bytes()
		} else {
			op = abi.NewObject(nil).Str("op", "add").Str("path", "/metadata/annotations").StrMap("value", map[string]string{"test.setpoint.dev/dry-run": v}).Bytes()
		}
		return &abi.AdmissionResponse{Allowed: true, Patch: append(append(abi.RawJSON("["), op...), ']')}, nil
	}
	return &abi.AdmissionResponse{Allowed: true}, nil
}

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	name := req.Object.String("metadata", "name")
	size := req.Object.String("spec", "size")
	child := abi.NewObject(nil).
		Str("apiVersion", "example.setpoint.dev/v1").
		Str("kind", "Gadget").
		Object("metadata", func(m *abi.Object) {
			m.Str("name", name+"-gadget").Str("namespace", req.Object.String("metadata", "namespace"))
		}).
		Object("spec", func(s *abi.Object) {
			s.Str("size", size)
			if req.Config["read"] != "true" {
				return
			}
			// Host functions, as the plugin's permissions allow.
			items, err := h.List(abi.ListRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Gadget", Namespace: req.Object.String("metadata", "namespace")})
			if err != nil {
				s.Str("readError", err.Error())
			} else {
				s.Int("listed", int64(len(items)))
			}
			if err := h.EmitEvent(abi.EmitEventRequest{Event: abi.Event{Type: "Normal", Reason: "GadgetsListed", Message: "listed gadgets"}}); err != nil {
				s.Str("eventError", err.Error())
			}
		}).Bytes()
	state := "Provisioning"
	if len(req.Children["Gadget.example.setpoint.dev"]) > 0 {
		state = "Ready"
	}
	status := abi.NewObject(nil).Str("state", state).Str("size", size).Bytes()
	return &abi.ReconcileResponse{Status: status, Children: []abi.RawJSON{child}}, nil
}

func main() {}
`

// buildTestGuest builds testGuestSource with the standard Go toolchain.
func buildTestGuest() ([]byte, error) {
	sdk, err := filepath.Abs(filepath.Join("..", "sdk"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "setpoint-testguest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	gomod := "module example.com/testguest\n\ngo 1.26\n\nrequire github.com/setpoint-dev/setpoint/sdk v0.0.0\n\nreplace github.com/setpoint-dev/setpoint/sdk => " + sdk + "\n"
	for name, content := range map[string]string{"go.mod": gomod, "main.go": testGuestSource} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", "guest.wasm", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return os.ReadFile(filepath.Join(dir, "guest.wasm"))
}

// builtModule reads a guest built by `make plugins`.
func builtModule(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "bin", "wasm", name+".wasm"))
	if err != nil {
		t.Fatalf("%v (run `make plugins` first)", err)
	}
	return b
}

// withCustomSection returns wasm with a custom section appended: the same
// code under another digest, a second version for swaps.
func withCustomSection(wasm []byte, name string) []byte {
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, "version"...)
	out := append([]byte{}, wasm...)
	out = append(out, 0, byte(len(payload)))
	return append(out, payload...)
}

type uploadResult struct {
	code   int
	digest string
	msg    string
}

func upload(t *testing.T, s *testserver.Server, wasm []byte, query, contentType string) uploadResult {
	t.Helper()
	code, body, err := s.DoWith(http.MethodPost, modulesPath+query, s.Token, bytes.NewReader(wasm), testserver.DoOptions{
		Header: http.Header{"Content-Type": {contentType}}, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	var doc struct{ Digest, Message string }
	_ = json.Unmarshal(body, &doc)
	return uploadResult{code: code, digest: doc.Digest, msg: doc.Message}
}

func mustUpload(t *testing.T, s *testserver.Server, wasm []byte) string {
	t.Helper()
	r := upload(t, s, wasm, "", "application/wasm")
	if r.code != http.StatusCreated && r.code != http.StatusOK {
		t.Fatalf("upload: %d %s", r.code, r.msg)
	}
	return r.digest
}

// pluginStatus reads a Plugin's status.
type pluginStatus struct {
	Phase        string `json:"phase"`
	LoadedDigest string `json:"loadedDigest"`
	Calls        int64  `json:"calls"`
	Errors       int64  `json:"errors"`
	LastError    string `json:"lastError"`
	Conditions   []struct {
		Type, Status, Reason, Message string
	} `json:"conditions"`
}

func (p pluginStatus) condition(typ string) (status, reason, message string) {
	for _, c := range p.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

func getPlugin(t *testing.T, s *testserver.Server, name string) pluginStatus {
	t.Helper()
	code, body, err := s.Do("GET", pluginsPath+"/"+name, s.Token, nil)
	if err != nil || code != 200 {
		t.Fatalf("get plugin %s: %d %v %s", name, code, err, body)
	}
	var doc struct{ Status pluginStatus }
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Status
}

// waitPlugin polls a Plugin until ok accepts its status.
func waitPlugin(t *testing.T, s *testserver.Server, name string, timeout time.Duration, ok func(pluginStatus) bool) pluginStatus {
	t.Helper()
	var st pluginStatus
	testsupport.Poll(t, timeout, "plugin "+name+"'s status", func() (bool, string) {
		st = getPlugin(t, s, name)
		return ok(st), fmt.Sprintf("%+v", st)
	})
	return st
}

func loadedWith(digest string) func(pluginStatus) bool {
	return func(st pluginStatus) bool {
		s, _, _ := st.condition("Loaded")
		return st.Phase == "Loaded" && s == "True" && st.LoadedDigest == digest
	}
}

// applyPlugin creates or replaces a Plugin with kubectl.
func applyPlugin(t *testing.T, s *testserver.Server, manifest string) {
	t.Helper()
	if out, errOut, err := s.KubectlInput(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply plugin: %v\n%s%s", err, out, errOut)
	}
}

func pluginManifest(name, digest, body string) string {
	return fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Plugin\nmetadata:\n  name: %s\nspec:\n  module:\n    digest: %s\n%s", name, digest, body)
}

func plWidget(name, labels string) string {
	m := "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: " + name + "\n  namespace: default\n"
	if labels != "" {
		m += "  labels: {" + labels + "}\n"
	}
	return m + "spec: {name: " + name + ", size: small}\n"
}

// createWidget posts a widget through the API and returns the status code
// and body.
func createWidget(c *http.Client, s *testserver.Server, name string, labeled bool) (int, string, error) {
	labels := map[string]string{}
	if labeled {
		labels["team"] = "load"
	}
	obj := map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"name": name, "size": "small"},
	}
	b, _ := json.Marshal(obj)
	code, body, err := s.DoWith(http.MethodPost, widgetsPath, s.Token, bytes.NewReader(b), testserver.DoOptions{Client: c})
	if err != nil {
		return 0, "", err
	}
	return code, string(body), nil
}

func TestPlugins(t *testing.T) {
	requiredLabels := builtModule(t, "requiredlabels")
	defaults := builtModule(t, "defaults")
	noExports := builtModule(t, "noexports")
	badImport := builtModule(t, "badimport")
	type built struct {
		wasm []byte
		err  error
	}
	guestCh := make(chan built, 1)
	go func() { // build the test guest while the server starts
		wasm, err := buildTestGuest()
		guestCh <- built{wasm, err}
	}()

	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-status-interval", "500ms"}})
	crd, err := os.ReadFile(filepath.Join("..", "examples", "widget", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{string(crd), gadgetCRD} {
		if out, errOut, err := s.KubectlInput(m, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
		}
	}

	var rlDigest, defDigest string
	t.Run("upload", func(t *testing.T) {
		r := upload(t, s, requiredLabels, "", "application/wasm")
		if r.code != http.StatusCreated || !strings.HasPrefix(r.digest, "sha256:") {
			t.Fatalf("first upload: %d %q %s", r.code, r.digest, r.msg)
		}
		rlDigest = r.digest
		if again := upload(t, s, requiredLabels, "?digest="+rlDigest, "application/wasm"); again.code != http.StatusOK || again.digest != rlDigest {
			t.Errorf("re-upload with its digest: %d %q, want 200 %q", again.code, again.digest, rlDigest)
		}
		defDigest = mustUpload(t, s, defaults)

		code, body, err := s.Do("GET", modulesPath+"/"+rlDigest, s.Token, nil)
		if err != nil || code != 200 || !bytes.Equal(body, requiredLabels) {
			t.Errorf("GET module: %d %v, %d bytes (want the %d uploaded)", code, err, len(body), len(requiredLabels))
		}
		if code, _, _ := s.Do("GET", modulesPath+"/"+rlDigest, "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET module without a token: %d, want 401", code)
		}

		tests := []struct {
			name        string
			wasm        []byte
			query, ct   string
			code        int
			msgContains string
		}{
			{name: "stated digest differs", wasm: defaults, query: "?digest=" + rlDigest, ct: "application/wasm", code: 400, msgContains: "not the stated"},
			{name: "not wasm content type", wasm: defaults, ct: "application/json", code: 415, msgContains: "application/wasm"},
			{name: "missing exports", wasm: noExports, ct: "application/wasm", code: 422, msgContains: "missing export"},
			{name: "unknown import", wasm: badImport, ct: "application/wasm", code: 422, msgContains: "unknown import"},
			{name: "not a module", wasm: []byte("not wasm at all"), ct: "application/wasm", code: 422, msgContains: "module refused"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := upload(t, s, tt.wasm, tt.query, tt.ct)
				if r.code != tt.code || !strings.Contains(r.msg, tt.msgContains) {
					t.Errorf("got %d %q, want %d and a message with %q", r.code, r.msg, tt.code, tt.msgContains)
				}
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("kubectl shows the kind", func(t *testing.T) {
		out, errOut, err := s.Kubectl("explain", "plugins.spec.admission.failurePolicy")
		if err != nil || !strings.Contains(out, "Fail") {
			t.Errorf("kubectl explain: %v\n%s%s", err, out, errOut)
		}
	})

	applyPlugin(t, s, pluginManifest("required-labels", rlDigest, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE, UPDATE]
    type: Validating
  config:
    labels: team
`))
	waitPlugin(t, s, "required-labels", time.Minute, loadedWith(rlDigest))

	t.Run("denial through kubectl", func(t *testing.T) {
		_, errOut, err := s.KubectlInput(plWidget("unlabeled", ""), "apply", "-f", "-")
		want := `admission plugin "required-labels" denied the request: Widget unlabeled is missing required labels: team`
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("kubectl apply of an unlabeled widget: err %v, stderr %q; want %q", err, errOut, want)
		}
		if out, errOut, err := s.KubectlInput(plWidget("labeled", "team: a"), "apply", "-f", "-"); err != nil {
			t.Fatalf("labeled widget: %v %s%s", err, out, errOut)
		}
		out, _, _ := s.Kubectl("get", "plugins")
		if !strings.Contains(out, "required-labels") || !strings.Contains(out, rlDigest) || !strings.Contains(out, "Loaded") {
			t.Errorf("kubectl get plugins:\n%s", out)
		}
	})

	applyPlugin(t, s, pluginManifest("defaults", defDigest, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE]
    type: Mutating
  config:
    labels.team: platform
    annotations.owner: setpoint
`))
	waitPlugin(t, s, "defaults", time.Minute, loadedWith(defDigest))

	t.Run("mutation before validation", func(t *testing.T) {
		// The mutating plugin adds the label the validating one requires.
		if out, errOut, err := s.KubectlInput(plWidget("defaulted", ""), "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
		out, _, err := s.Kubectl("get", "widget", "defaulted", "-o", "jsonpath={.metadata.labels.team}/{.metadata.annotations.owner}")
		if err != nil || out != "platform/setpoint" {
			t.Errorf("defaulted widget labels/annotations: %q %v, want platform/setpoint", out, err)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		out, errOut, err := s.KubectlInput(plWidget("dry", ""), "create", "--dry-run=server", "-o", "jsonpath={.metadata.labels.team}", "-f", "-")
		if err != nil || out != "platform" {
			t.Fatalf("dry-run create: %q %v %s", out, err, errOut)
		}
		if code, _, _ := s.Do("GET", widgetsPath+"/dry", s.Token, nil); code != http.StatusNotFound {
			t.Errorf("a dry-run widget was stored: GET gives %d", code)
		}
	})

	t.Run("removing a plugin unbinds it", func(t *testing.T) {
		if out, errOut, err := s.Kubectl("delete", "plugin", "defaults"); err != nil {
			t.Fatalf("delete plugin: %v %s%s", err, out, errOut)
		}
		if _, errOut, err := s.KubectlInput(plWidget("undefaulted", ""), "apply", "-f", "-"); err == nil || !strings.Contains(errOut, "missing required labels: team") {
			t.Errorf("after deleting the defaults plugin: %v %s", err, errOut)
		}
	})

	t.Run("invalid module leaves the running version serving", func(t *testing.T) {
		if r := upload(t, s, noExports, "", "application/wasm"); r.code != 422 {
			t.Fatalf("invalid upload: %d", r.code)
		}
		missing := "sha256:" + strings.Repeat("0", 64)
		applyPlugin(t, s, pluginManifest("required-labels", missing, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE, UPDATE]
    type: Validating
  config:
    labels: team
`))
		st := waitPlugin(t, s, "required-labels", time.Minute, func(st pluginStatus) bool {
			_, reason, _ := st.condition("Loaded")
			return reason == "ModuleNotFound"
		})
		if st.LoadedDigest != rlDigest || st.Phase != "Pending" {
			t.Errorf("status after naming a missing module: %+v", st)
		}
		if _, errOut, err := s.KubectlInput(plWidget("still-denied", "tier: x"), "apply", "-f", "-"); err == nil || !strings.Contains(errOut, "missing required labels: team") {
			t.Errorf("the running version stopped serving: %v %s", err, errOut)
		}
		applyPlugin(t, s, pluginManifest("required-labels", rlDigest, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE, UPDATE]
    type: Validating
  config:
    labels: team
`))
		waitPlugin(t, s, "required-labels", time.Minute, loadedWith(rlDigest))
	})

	t.Run("hot swap under load", func(t *testing.T) {
		v2 := withCustomSection(requiredLabels, "setpoint-test-v2")
		v2Digest := mustUpload(t, s, v2)
		if v2Digest == rlDigest {
			t.Fatal("the second version has the first one's digest")
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var calls, failures atomic.Int64
		var firstFailure atomic.Pointer[string]
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := s.HTTPClient()
				defer c.CloseIdleConnections()
				for i := 0; ctx.Err() == nil; i++ {
					labeled := i%2 == 0
					code, body, err := createWidget(c, s, fmt.Sprintf("load-%d-%d", w, i), labeled)
					calls.Add(1)
					ok := err == nil && ((labeled && code == 201) || (!labeled && code == 422 && strings.Contains(body, "missing required labels")))
					if !ok {
						failures.Add(1)
						msg := fmt.Sprintf("labeled=%v: %d %v %s", labeled, code, err, body)
						firstFailure.CompareAndSwap(nil, &msg)
					}
				}
			}()
		}
		digests := []string{v2Digest, rlDigest}
		for i := range 10 {
			d := digests[i%2]
			mustUpload(t, s, map[string][]byte{rlDigest: requiredLabels, v2Digest: v2}[d]) // idempotent re-upload
			patch := fmt.Sprintf(`{"spec":{"module":{"digest":%q}}}`, d)
			if out, errOut, err := s.Kubectl("patch", "plugin", "required-labels", "--type=merge", "-p", patch); err != nil {
				t.Fatalf("swap %d: %v %s%s", i, err, out, errOut)
			}
			waitPlugin(t, s, "required-labels", time.Minute, loadedWith(d))
		}
		time.Sleep(300 * time.Millisecond) // calls after the last swap
		stop()
		wg.Wait()
		if calls.Load() < 20 {
			t.Errorf("only %d calls during the swaps", calls.Load())
		}
		if f := failures.Load(); f > 0 {
			t.Errorf("%d of %d calls failed during 10 swaps; first: %s", f, calls.Load(), *firstFailure.Load())
		}
		t.Logf("10 swaps under load: %d admission calls, %d failed", calls.Load(), failures.Load())
		if out, errOut, err := s.Kubectl("delete", "widgets", "-l", "team=load", "--wait=false"); err != nil {
			t.Errorf("delete the load's widgets: %v %s%s", err, out, errOut)
		}
		// Swaps back and forth repeat the same message, which aggregates
		// into one Event with a count, as in Kubernetes: count occurrences.
		out, _, _ := s.Kubectl("get", "events", "-A", "-o", `jsonpath={range .items[*]}{.count}{"\t"}{.message}{"\n"}{end}`)
		swaps := 0
		for line := range strings.Lines(out) {
			count, msg, _ := strings.Cut(strings.TrimSpace(line), "\t")
			if n, err := strconv.Atoi(count); err == nil && strings.HasPrefix(msg, "swapped module") {
				swaps += n
			}
		}
		if swaps < 10 {
			t.Errorf("want an event occurrence per swap, got %d in %q", swaps, out)
		}
		if code, body, err := s.Do("GET", "/metrics", s.Token, nil); err != nil || code != 200 || !strings.Contains(string(body), `setpoint_plugin_calls_total{plugin="required-labels"}`) {
			t.Errorf("/metrics: %d %v, no setpoint_plugin_calls_total for required-labels", code, err)
		}
		st := getPlugin(t, s, "required-labels")
		if st.Errors != 0 {
			t.Errorf("plugin status counts %d errors: %s", st.Errors, st.LastError)
		}
	})

	b := <-guestCh
	if b.err != nil {
		t.Fatalf("build the test guest: %v", b.err)
	}
	guest := b.wasm
	guestDigest := mustUpload(t, s, guest)

	t.Run("failure policies", func(t *testing.T) {
		tests := []struct {
			name, mode, policy string
			wantDenied         bool
			wantMessage        string
		}{
			{name: "timeout with Fail", mode: "loop", policy: "Fail", wantDenied: true, wantMessage: "host: timeout"},
			{name: "panic with Fail", mode: "panic", policy: "Fail", wantDenied: true, wantMessage: "guest failure"},
			{name: "timeout with Ignore", mode: "loop", policy: "Ignore"},
			{name: "panic with Ignore", mode: "panic", policy: "Ignore"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("faulty-%d", i)
				applyPlugin(t, s, pluginManifest(name, guestDigest, fmt.Sprintf(`  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE]
    type: Validating
    failurePolicy: %s
  limits:
    callTimeout: 300ms
  config:
    mode: %s
`, tt.policy, tt.mode)))
				waitPlugin(t, s, name, time.Minute, loadedWith(guestDigest))
				widget := fmt.Sprintf("policy-%d", i)
				_, errOut, err := s.KubectlInput(plWidget(widget, "team: a"), "apply", "-f", "-")
				if tt.wantDenied {
					want := fmt.Sprintf("admission plugin %q failed (failurePolicy Fail)", name)
					if err == nil || !strings.Contains(errOut, want) || !strings.Contains(errOut, tt.wantMessage) {
						t.Errorf("kubectl apply: err %v, stderr %q; want %q and %q", err, errOut, want, tt.wantMessage)
					}
				} else if err != nil {
					t.Errorf("failurePolicy Ignore denied the write: %v %s", err, errOut)
				}
				st := waitPlugin(t, s, name, 30*time.Second, func(st pluginStatus) bool { return st.Errors > 0 })
				if st.LastError == "" || st.Phase != "Loaded" {
					t.Errorf("status after a failed call: %+v", st)
				}
				if out, errOut, err := s.Kubectl("delete", "plugin", name, "--wait=true"); err != nil {
					t.Fatalf("delete plugin: %v %s%s", err, out, errOut)
				}
				// The other plugin kept serving.
				if _, errOut, err := s.KubectlInput(plWidget(widget+"-unlabeled", ""), "apply", "-f", "-"); err == nil || !strings.Contains(errOut, "missing required labels: team") {
					t.Errorf("after %s: required-labels should still deny: %v %s", tt.name, err, errOut)
				}
			})
		}
		// Without the faulty plugins, writes are admitted as before.
		if _, errOut, err := s.KubectlInput(plWidget("after-faulty", "team: a"), "apply", "-f", "-"); err != nil {
			t.Errorf("a deleted plugin still admits: %v %s", err, errOut)
		}
	})

	t.Run("dry run reaches the plugin", func(t *testing.T) {
		applyPlugin(t, s, pluginManifest("dryrun-marker", guestDigest, `  admission:
  - resources: [widgets.example.setpoint.dev]
    operations: [CREATE]
    type: Mutating
  config:
    mode: dryrun
`))
		waitPlugin(t, s, "dryrun-marker", time.Minute, loadedWith(guestDigest))
		for _, tt := range []struct{ args []string }{{[]string{"--dry-run=server"}}, {nil}} {
			args := append([]string{"create", "-o", `jsonpath={.metadata.annotations.test\.setpoint\.dev/dry-run}`, "-f", "-"}, tt.args...)
			out, errOut, err := s.KubectlInput(plWidget("marked", "team: a"), args...)
			want := map[bool]string{true: "true", false: "false"}[len(tt.args) > 0]
			if err != nil || out != want {
				t.Errorf("create %v: annotation %q (%v %s), want %q", tt.args, out, err, errOut, want)
			}
		}
		if out, errOut, err := s.Kubectl("delete", "plugin", "dryrun-marker"); err != nil {
			t.Fatalf("delete plugin: %v %s%s", err, out, errOut)
		}
	})

	t.Run("reconcile through a plugin", func(t *testing.T) {
		applyPlugin(t, s, pluginManifest("gadgets", guestDigest, `  reconcile:
    for: widgets.example.setpoint.dev
    owns: [gadgets.example.setpoint.dev]
  config:
    read: "true"
`))
		waitPlugin(t, s, "gadgets", time.Minute, loadedWith(guestDigest))
		for i := range 3 {
			if _, errOut, err := s.KubectlInput(plWidget(fmt.Sprintf("rec-%d", i), "team: a"), "apply", "-f", "-"); err != nil {
				t.Fatalf("create widget: %v %s", err, errOut)
			}
		}
		start := time.Now()
		for i := range 3 {
			name := fmt.Sprintf("rec-%d", i)
			testsupport.Poll(t, time.Minute-time.Since(start), "widget "+name+" Ready with its gadget", func() (bool, string) {
				state, _, _ := s.Kubectl("get", "widget", name, "-o", `jsonpath={.status.state}/{.status.conditions[?(@.type=="Ready")].status}`)
				owner, _, _ := s.Kubectl("get", "gadget", name+"-gadget", "-o", "jsonpath={.metadata.ownerReferences[0].name}/{.spec.size}")
				return state == "Ready/True" && owner == name+"/small", fmt.Sprintf("state %q, gadget %q", state, owner)
			})
		}
		// Without permissions the host functions are refused...
		out, _, _ := s.Kubectl("get", "gadget", "rec-0-gadget", "-o", "jsonpath={.spec.readError}|{.spec.eventError}")
		if !strings.Contains(out, "permission denied") || strings.Count(out, "permission") < 2 {
			t.Errorf("host functions without permissions: %q, want permission denied for list and emit_event", out)
		}
		// ...and with them they are served.
		applyPlugin(t, s, pluginManifest("gadgets", guestDigest, `  reconcile:
    for: widgets.example.setpoint.dev
    owns: [gadgets.example.setpoint.dev]
  permissions:
    read: [gadgets.example.setpoint.dev]
    write: [events]
  config:
    read: "true"
`))
		testsupport.Poll(t, time.Minute, "host functions with permissions to list at least 3 gadgets and no error", func() (bool, string) {
			out, _, _ := s.Kubectl("get", "gadget", "rec-0-gadget", "-o", "jsonpath={.spec.listed}|{.spec.readError}{.spec.eventError}")
			var listed int
			_, err := fmt.Sscanf(out, "%d|", &listed)
			return err == nil && listed >= 3 && strings.HasSuffix(out, "|"), fmt.Sprintf("%q", out)
		})
		out, _, _ = s.Kubectl("get", "events", "-o", "jsonpath={.items[*].reason}")
		if !strings.Contains(out, "GadgetsListed") {
			t.Errorf("no GadgetsListed event among %q", out)
		}

		// The plugin exports finalize: its finalizer guards the widget, and
		// deletion runs it before the widget and its gadget go.
		if out, _, _ := s.Kubectl("get", "widget", "rec-2", "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(out, "setpoint.dev/gadgets") {
			t.Errorf("widget finalizers %q, want the plugin's", out)
		}
		if out, errOut, err := s.Kubectl("delete", "widget", "rec-2", "--timeout=60s"); err != nil {
			t.Fatalf("delete widget: %v %s%s", err, out, errOut)
		}
		testsupport.Poll(t, time.Minute, "the deleted widget's gadget gone", func() (bool, string) {
			_, errOut, _ := s.Kubectl("get", "gadget", "rec-2-gadget")
			return strings.Contains(errOut, "NotFound") || strings.Contains(errOut, "not found"), errOut
		})
		if out, _, _ := s.Kubectl("get", "events", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(out, "GadgetReleased") {
			t.Errorf("no GadgetReleased event from finalize among %q", out)
		}
	})

	t.Run("restart reloads plugins from the store", func(t *testing.T) {
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		s.Restart()
		// At once: a write waits for the stored plugins instead of skipping them.
		_, errOut, err := s.KubectlInput(plWidget("after-restart", "tier: x"), "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, "missing required labels: team") {
			t.Errorf("right after a restart: %v %s", err, errOut)
		}
		waitPlugin(t, s, "required-labels", time.Minute, loadedWith(rlDigest))
		waitPlugin(t, s, "gadgets", time.Minute, loadedWith(guestDigest))
		if code, body, _ := s.Do("GET", modulesPath+"/"+guestDigest, s.Token, nil); code != 200 || !bytes.Equal(body, guest) {
			t.Errorf("module after a restart: %d, %d bytes", code, len(body))
		}
		if _, errOut, err := s.KubectlInput(plWidget("rec-after", "team: a"), "apply", "-f", "-"); err != nil {
			t.Fatalf("create widget: %v %s", err, errOut)
		}
		testsupport.Poll(t, time.Minute, "the widget Ready after a restart", func() (bool, string) {
			state, _, _ := s.Kubectl("get", "widget", "rec-after", "-o", "jsonpath={.status.state}")
			return state == "Ready", fmt.Sprintf("state %q", state)
		})
	})
}
