package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/gc"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// testServer is the API on a real Badger store, served over plain HTTP on
// loopback, with its engine's background loops and a garbage collector
// running.
type testServer struct {
	*httptest.Server
	api *Server
	eng *engine.Service
	db  *badger.DB
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, api := newTestAPI(t, db, Options{})
	collector, err := gc.New(eng, gc.Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { _ = eng.Run(ctx) })
	loops.Go(func() { _ = collector.Run(ctx) })
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		loops.Wait()
		db.Close()
	})
	return &testServer{Server: hs, api: api, eng: eng, db: db}
}

// newTestAPI builds an engine on db and the API over it with opts; the
// caller runs the engine's loops when the test needs them.
func newTestAPI(t testing.TB, db *badger.DB, opts Options) (*engine.Service, *Server) {
	t.Helper()
	eng, err := engine.New(context.Background(), engine.Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine = eng
	api, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return eng, api
}

type request struct {
	method, path, contentType, accept, body string
}

func (ts *testServer) do(t *testing.T, rq request) (int, []byte, http.Header) {
	t.Helper()
	if rq.method == "" {
		rq.method = http.MethodGet
	}
	req, err := http.NewRequest(rq.method, ts.URL+rq.path, strings.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	if rq.contentType != "" {
		req.Header.Set("Content-Type", rq.contentType)
	} else if rq.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if rq.accept != "" {
		req.Header.Set("Accept", rq.accept)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// mustDo is do that fails the test on an unexpected code.
func (ts *testServer) mustDo(t *testing.T, want int, rq request) []byte {
	t.Helper()
	code, b, _ := ts.do(t, rq)
	if code != want {
		t.Fatalf("%s %s = %d %s, want %d", rq.method, rq.path, code, b, want)
	}
	return b
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
const widgetsPath = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"

func (ts *testServer) registerWidget(t *testing.T) {
	t.Helper()
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: crdPath, contentType: "application/yaml",
		body: readFile(t, "../../examples/widget/crd.yaml")})
}

func widgetJSON(name, size string, labels map[string]string) string {
	l, _ := json.Marshal(labels)
	return fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"labels":%s},"spec":{"name":"W","size":%q}}`, name, l, size)
}

func status(t *testing.T, b []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(b, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status: %s", b)
	}
	return st
}

func TestErrors(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", nil)})
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	deepYAML := ""
	for i := 0; i <= MaxDepth; i++ {
		deepYAML += strings.Repeat("  ", i) + "a:\n"
	}
	tests := []struct {
		name   string
		rq     request
		code   int
		reason metav1.StatusReason
		causes []string
	}{
		{name: "unknown resource", rq: request{path: "/apis/example.setpoint.dev/v1/gadgets"}, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown object", rq: request{path: widgetsPath + "/nope"}, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown subresource", rq: request{path: widgetsPath + "/a/scale"}, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "method", rq: request{method: "PUT", path: widgetsPath}, code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "too large", rq: request{method: "POST", path: widgetsPath, body: `{"x":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`}, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge},
		{name: "media type", rq: request{method: "POST", path: widgetsPath, contentType: "text/plain", body: "x"}, code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "apply without a field manager", rq: request{method: "PATCH", path: widgetsPath + "/a", contentType: "application/apply-patch+yaml", body: "{}"}, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"fieldManager"}},
		{name: "cbor apply", rq: request{method: "PATCH", path: widgetsPath + "/a?fieldManager=m", contentType: "application/apply-patch+cbor", body: "{}"}, code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "deep JSON", rq: request{method: "POST", path: widgetsPath, body: deep}, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "deep YAML", rq: request{method: "POST", path: widgetsPath, contentType: "application/yaml", body: deepYAML}, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed JSON", rq: request{method: "POST", path: widgetsPath, body: `{"a":`}, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "invalid", rq: request{method: "POST", path: widgetsPath, body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"b"},"spec":{"size":"huge"}}`},
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"spec.size", "spec.name"}},
		{name: "exists", rq: request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", nil)}, code: 409, reason: metav1.StatusReasonAlreadyExists},
		{name: "conflict", rq: request{method: "PUT", path: widgetsPath + "/a", body: strings.Replace(widgetJSON("a", "large", nil), `"name":"a"`, `"name":"a","resourceVersion":"1"`, 1)},
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "namespace mismatch", rq: request{method: "POST", path: widgetsPath, body: strings.Replace(widgetJSON("c", "small", nil), `"name":"c"`, `"name":"c","namespace":"other"`, 1)},
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "watch from a compacted revision", rq: request{path: widgetsPath + "?watch=true&resourceVersion=1"}, code: 200},
	}
	rev, _ := ts.db.CurrentRevision(context.Background())
	if err := ts.db.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b, _ := ts.do(t, tt.rq)
			if code != tt.code {
				t.Fatalf("code = %d (%s), want %d", code, b, tt.code)
			}
			if tt.code == 200 {
				var ev struct {
					Type   string
					Object metav1.Status
				}
				if err := json.Unmarshal(b, &ev); err != nil || ev.Type != "ERROR" || ev.Object.Code != 410 {
					t.Fatalf("watch = %s, want an ERROR event with a 410 Status", b)
				}
				return
			}
			st := status(t, b)
			if st.Reason != tt.reason || int(st.Code) != tt.code {
				t.Errorf("status = %d %s, want %d %s", st.Code, st.Reason, tt.code, tt.reason)
			}
			if tt.code == 413 && st.Message != fmt.Sprintf("Request entity too large: limit is %d", DefaultMaxBodyBytes) {
				t.Errorf("413 message %q, want kube-apiserver's", st.Message)
			}
			for _, f := range tt.causes {
				found := false
				for _, c := range st.Details.Causes {
					found = found || c.Field == f
				}
				if !found {
					t.Errorf("no cause for %s in %s", f, b)
				}
			}
		})
	}
}

func TestDiscovery(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	b := ts.mustDo(t, 200, request{path: "/apis"})
	if !strings.Contains(string(b), `"example.setpoint.dev/v1"`) || !strings.Contains(string(b), `"apiextensions.k8s.io/v1"`) {
		t.Errorf("/apis = %s", b)
	}
	code, b, h := ts.do(t, request{path: "/apis", accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"})
	if code != 200 || h.Get("Content-Type") != aggregatedType || !strings.Contains(string(b), `"shortNames":["wg"]`) {
		t.Errorf("aggregated /apis = %d %s %s", code, h.Get("Content-Type"), b)
	}
	b = ts.mustDo(t, 200, request{path: "/api", accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
	if !strings.Contains(string(b), `"namespaces"`) {
		t.Errorf("aggregated /api = %s", b)
	}
	b = ts.mustDo(t, 200, request{path: "/apis/example.setpoint.dev/v1"})
	if !strings.Contains(string(b), `"widgets/status"`) {
		t.Errorf("resource list = %s", b)
	}
	ts.mustDo(t, 200, request{path: "/apis/example.setpoint.dev"})
	// Stored resources carry the hash of the version they are stored as,
	// the values kube-apiserver lists (Namespaces: Q3oi5N2YM8M=); reviews,
	// never stored, none.
	hashes := map[string]string{}
	for _, p := range []string{"/api/v1", "/apis/example.setpoint.dev/v1", "/apis/authorization.k8s.io/v1"} {
		var l metav1.APIResourceList
		if err := json.Unmarshal(ts.mustDo(t, 200, request{path: p}), &l); err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			hashes[r.Name] = r.StorageVersionHash
		}
	}
	for name, want := range map[string]string{"namespaces": "Q3oi5N2YM8M=", "configmaps": "qFsyl6wFWjQ=",
		"widgets": discovery.StorageVersionHash("example.setpoint.dev", "v1", "Widget"), "widgets/status": "", "selfsubjectaccessreviews": ""} {
		if got, ok := hashes[name]; !ok || got != want {
			t.Errorf("storageVersionHash of %s = %q (listed: %v), want %q", name, got, ok, want)
		}
	}
	ts.mustDo(t, 200, request{path: "/version"})
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		ts.mustDo(t, 200, request{path: p})
	}
	b = ts.mustDo(t, 200, request{path: "/openapi/v3"})
	var idx v3Index
	if err := json.Unmarshal(b, &idx); err != nil || idx.Paths["apis/example.setpoint.dev/v1"].ServerRelativeURL == "" {
		t.Fatalf("/openapi/v3 = %s", b)
	}
	for _, p := range []string{"api/v1", "apis/apiextensions.k8s.io/v1"} {
		if idx.Paths[p].ServerRelativeURL == "" {
			t.Errorf("/openapi/v3 lacks the built-in %s", p)
		}
	}
	// Leases are described only while their CRD serves them.
	if _, ok := idx.Paths["apis/coordination.k8s.io/v1"]; ok {
		t.Errorf("/openapi/v3 describes Leases, which no CRD serves")
	}
	if b := ts.mustDo(t, 200, request{path: idx.Paths["api/v1"].ServerRelativeURL}); !strings.Contains(string(b), `"/api/v1/namespaces/{name}"`) || !strings.Contains(string(b), "io.k8s.api.core.v1.Namespace") {
		t.Errorf("core openapi v3 lacks the namespace paths or model")
	}
	b = ts.mustDo(t, 200, request{path: idx.Paths["apis/example.setpoint.dev/v1"].ServerRelativeURL})
	if !strings.Contains(string(b), `"lastProvisioned"`) {
		t.Errorf("openapi v3 lacks the widget schema")
	}
	ts.mustDo(t, 200, request{path: "/openapi/v2", accept: protoV2Type})
	b = ts.mustDo(t, 200, request{path: "/openapi/v2"})
	if !strings.Contains(string(b), "dev.setpoint.example.v1.Widget") {
		t.Errorf("openapi v2 lacks the Widget definition")
	}
	// Deleting the CRD leaves it terminating while its objects go (one
	// waits for its finalizer): the kind stays served, creates are refused.
	ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath,
		body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"held","finalizers":["example.setpoint.dev/hold"]},"spec":{"name":"W","size":"small"}}`})
	b = ts.mustDo(t, 200, request{method: "DELETE", path: crdPath + "/widgets.example.setpoint.dev"})
	if !strings.Contains(string(b), `"deletionTimestamp"`) || !strings.Contains(string(b), "customresourcecleanup.apiextensions.k8s.io") {
		t.Errorf("DELETE of the CRD answered %s, want it terminating with the cleanup finalizer", b)
	}
	code, b, _ = ts.do(t, request{method: "POST", path: widgetsPath, body: widgetJSON("late", "small", nil)})
	if code != http.StatusMethodNotAllowed || !strings.Contains(string(b), "terminating") {
		t.Errorf("create while the CRD is terminating = %d %s, want 405", code, b)
	}
	testsupport.Eventually(t, 10*time.Second, "the object to be deleting", func() bool {
		b := ts.mustDo(t, 200, request{path: widgetsPath + "/held"})
		return strings.Contains(string(b), `"deletionTimestamp"`)
	})
	ts.mustDo(t, 200, request{path: widgetsPath})
	ts.mustDo(t, 200, request{method: "PATCH", path: widgetsPath + "/held", contentType: "application/merge-patch+json",
		body: `{"metadata":{"finalizers":null}}`})
	// Then the CRD goes, and the kind with it.
	testsupport.Eventually(t, 10*time.Second, "the kind to stop being served", func() bool {
		code, _, _ := ts.do(t, request{path: widgetsPath})
		return code == http.StatusNotFound
	})
	ts.mustDo(t, 404, request{path: crdPath + "/widgets.example.setpoint.dev"})
	if b := ts.mustDo(t, 200, request{path: "/apis"}); strings.Contains(string(b), "example.setpoint.dev") {
		t.Errorf("/apis still lists the group: %s", b)
	}
}

func TestTableAndYAML(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	ts.mustDo(t, 201, request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", nil)})
	b := ts.mustDo(t, 200, request{path: widgetsPath, accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
	var tbl metav1.Table
	if err := json.Unmarshal(b, &tbl); err != nil || tbl.Kind != "Table" || len(tbl.Rows) != 1 {
		t.Fatalf("table = %s", b)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if got := strings.Join(cols, ","); got != "Name,Display,Size,State,Provisioned,Age" {
		t.Errorf("columns = %s", got)
	}
	if tbl.Rows[0].Cells[2] != "small" {
		t.Errorf("cells = %v", tbl.Rows[0].Cells)
	}
	b = ts.mustDo(t, 200, request{path: widgetsPath + "/a", accept: "application/yaml"})
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil || m["kind"] != "Widget" {
		t.Errorf("yaml = %s", b)
	}
}

func TestWatchHTTP(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	req, _ := http.NewRequest("GET", ts.URL+widgetsPath+"?watch=true&labelSelector=env%3Ddev&timeoutSeconds=10", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() (string, string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		var ev struct {
			Type   string
			Object struct{ Metadata metav1.ObjectMeta }
		}
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("event %s: %v", lines.Bytes(), err)
		}
		return ev.Type, ev.Object.Metadata.Name
	}
	ts.mustDo(t, 201, request{method: "POST", path: widgetsPath, body: widgetJSON("other", "small", map[string]string{"env": "prod"})})
	ts.mustDo(t, 201, request{method: "POST", path: widgetsPath, body: widgetJSON("a", "small", map[string]string{"env": "dev"})})
	ts.mustDo(t, 200, request{method: "PATCH", path: widgetsPath + "/a", contentType: "application/merge-patch+json", body: `{"spec":{"size":"large"}}`})
	ts.mustDo(t, 200, request{method: "DELETE", path: widgetsPath + "/a"})
	for _, want := range []string{"ADDED a", "MODIFIED a", "DELETED a"} {
		if typ, name := next(); typ+" "+name != want {
			t.Fatalf("event %s %s, want %s", typ, name, want)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); resp.Body.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the watch hung")
	}
}

// TestKubectl runs the real kubectl against the API over plain HTTP on
// loopback: what kubectl needs from discovery, OpenAPI and Tables.
func TestKubectl(t *testing.T) {
	if _, err := os.Stat("/usr/bin/kubectl"); err != nil {
		t.Skip("no /usr/bin/kubectl")
	}
	ts := newTestServer(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: %s\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\n    namespace: default\nusers:\n- name: u\n  user: {}\ncurrent-context: s\n", ts.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("/usr/bin/kubectl", append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	steps := []struct {
		stdin   string
		args    []string
		want    string
		wantErr bool
	}{
		{args: []string{"apply", "-f", "../../examples/widget/crd.yaml"}, want: "created"},
		{args: []string{"wait", "--for=condition=Established", "crd/widgets.example.setpoint.dev", "--timeout=10s"}, want: "condition met"},
		{stdin: "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: foo\n  labels: {env: dev}\nspec:\n  name: Foo\n  size: small\n",
			args: []string{"apply", "-f", "-"}, want: "widget.example.setpoint.dev/foo created"},
		{args: []string{"get", "wg"}, want: "foo"},
		{args: []string{"get", "widgets", "-l", "env in (dev,prod)", "-o", "jsonpath={.items[*].metadata.name}"}, want: "foo"},
		{args: []string{"explain", "widget.spec"}, want: "size"},
		{args: []string{"explain", "namespace.status"}, want: "phase"},
		{args: []string{"api-resources"}, want: "widgets"},
		{args: []string{"get", "ns"}, want: "default"},
		{stdin: "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  name: Bad\n  size: huge\n",
			args: []string{"apply", "-f", "-"}, want: `spec.size: Unsupported value: "huge"`, wantErr: true},
		{stdin: "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  name: Bad\n  size: small\n  bogus: 1\n",
			args: []string{"apply", "--validate=strict", "-f", "-"}, want: `unknown field "spec.bogus"`, wantErr: true},
		{args: []string{"label", "widget", "foo", "team=a"}, want: "labeled"},
		{args: []string{"annotate", "widget", "foo", "note=hi"}, want: "annotated"},
		{args: []string{"patch", "widget", "foo", "--type=merge", "-p", `{"spec":{"size":"medium"}}`}, want: "patched"},
		{args: []string{"patch", "widget", "foo", "--type=json", "-p", `[{"op":"replace","path":"/spec/size","value":"large"}]`}, want: "patched"},
		{args: []string{"get", "widget", "foo", "-o", "yaml"}, want: "size: large"},
		{args: []string{"get", "widget", "foo", "-o", "json"}, want: `"team": "a"`},
		{stdin: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n", args: []string{"apply", "-f", "-"}, want: "namespace/team-a created"},
		{args: []string{"label", "ns", "team-a", "x=y"}, want: "labeled"},
		{args: []string{"delete", "ns", "team-a"}, want: "deleted"},
		{args: []string{"create", "ns", "team-b"}, want: "namespace/team-b created"}, // a protobuf body
		{args: []string{"delete", "widgets", "-l", "env=dev"}, want: "deleted"},
		{args: []string{"get", "widgets"}, want: "No resources found"},
	}
	for _, st := range steps {
		out, err := kubectl(st.stdin, st.args...)
		if (err != nil) != st.wantErr || !strings.Contains(out, st.want) {
			t.Fatalf("kubectl %s: err %v, output:\n%s\nwant %q", strings.Join(st.args, " "), err, out, st.want)
		}
	}
}

// TestKubectlApplyWatchWait covers kubectl's three-way apply, get -w and
// wait against the API over plain HTTP on loopback.
func TestKubectlApplyWatchWait(t *testing.T) {
	if _, err := os.Stat("/usr/bin/kubectl"); err != nil {
		t.Skip("no /usr/bin/kubectl")
	}
	ts := newTestServer(t)
	ts.registerWidget(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: %s\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\n    namespace: default\nusers:\n- name: u\n  user: {}\ncurrent-context: s\n", ts.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache")}
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("/usr/bin/kubectl", append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	manifest := filepath.Join(dir, "w.yaml")
	write := func(size, labels string) {
		m := fmt.Sprintf("apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata:\n  name: foo\n  labels: {%s}\nspec:\n  name: Foo\n  size: %s\n", labels, size)
		if err := os.WriteFile(manifest, []byte(m), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// get -w in the background, from before the widget exists.
	watchCmd := exec.Command("/usr/bin/kubectl", append(base, "get", "widgets", "-w", "--output-watch-events")...)
	stdout, _ := watchCmd.StdoutPipe()
	if err := watchCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watchCmd.Process.Kill(); _ = watchCmd.Wait() }()
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	time.Sleep(500 * time.Millisecond) // let the watch start

	write("small", "env: dev, team: a")
	if out := kubectl("apply", "-f", manifest); !strings.Contains(out, "created") {
		t.Fatalf("apply: %s", out)
	}
	rv := kubectl("get", "widget", "foo", "-o", "jsonpath={.metadata.resourceVersion}")
	if out := kubectl("apply", "-f", manifest); !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply unchanged: %s", out)
	}
	if rv2 := kubectl("get", "widget", "foo", "-o", "jsonpath={.metadata.resourceVersion}"); rv2 != rv {
		t.Fatalf("resourceVersion %s -> %s after an unchanged apply", rv, rv2)
	}
	write("large", "env: dev")
	if out := kubectl("apply", "-f", manifest); !strings.Contains(out, "configured") {
		t.Fatalf("re-apply changed: %s", out)
	}
	if got := kubectl("get", "widget", "foo", "-o", "jsonpath={.spec.size} {.metadata.labels}"); got != `large {"env":"dev"}` {
		t.Fatalf("after the three-way apply: %s", got)
	}

	// wait --for=condition=Ready sees a condition written through /status.
	waitCmd := exec.Command("/usr/bin/kubectl", append(base, "wait", "--for=condition=Ready", "widget/foo", "--timeout=20s")...)
	var waitOut strings.Builder
	waitCmd.Stdout, waitCmd.Stderr = &waitOut, &waitOut
	if err := waitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	ts.mustDo(t, 200, request{method: "PATCH", path: widgetsPath + "/foo/status", contentType: "application/merge-patch+json",
		body: `{"status":{"state":"Ready","conditions":[{"type":"Ready","status":"True","reason":"Provisioned","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`})
	if err := waitCmd.Wait(); err != nil || !strings.Contains(waitOut.String(), "condition met") {
		t.Fatalf("wait: %v %s", err, waitOut.String())
	}
	if out := kubectl("delete", "-f", manifest); !strings.Contains(out, "deleted") {
		t.Fatalf("delete -f: %s", out)
	}

	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !(seen["ADDED"] && seen["MODIFIED"] && seen["DELETED"]) {
		select {
		case line, ok := <-events:
			if !ok {
				t.Fatalf("kubectl get -w ended; saw %v", seen)
			}
			if f := strings.Fields(line); len(f) > 1 && f[1] == "foo" {
				seen[f[0]] = true
			}
		case <-deadline:
			t.Fatalf("kubectl get -w saw %v, want ADDED, MODIFIED and DELETED", seen)
		}
	}
}
