package serving

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// auditLog collects an Auditor's output.
type auditLog struct{ syncBuffer }

// events parses the lines written so far.
func (l *auditLog) events(t *testing.T) []auditv1.Event {
	t.Helper()
	var out []auditv1.Event
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" {
			t.Fatalf("audit line %q: kind %q apiVersion %q", sc.Text(), ev.Kind, ev.APIVersion)
		}
		out = append(out, ev)
	}
	return out
}

func newAuditor(t *testing.T, policyYAML string, out io.Writer, buffer int, reg prometheus.Registerer) *Auditor {
	t.Helper()
	p, err := policy.LoadPolicyFromBytes([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuditor(AuditOptions{Policy: p, Out: out, BufferSize: buffer, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// auditAPI answers like the API: objects as JSON, a Status for errors,
// watches as a stream, and panics on /api/v1/panic.
func auditAPI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("watch") == "true" {
		if websocket.IsWebSocketUpgrade(r) {
			c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"ADDED"}`))
			_, _, _ = c.ReadMessage() // until the client closes
			c.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{}}` + "\n"))
		w.(http.Flusher).Flush()
		return
	}
	if strings.HasSuffix(r.URL.Path, "/panic") {
		panic("boom")
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(body); err != nil {
			WriteStatus(w, http.StatusBadRequest, "BadRequest", "not an object")
			return
		}
		u.SetUID("uid-1")
		u.SetResourceVersion("7")
		w.WriteHeader(http.StatusCreated)
		b, _ := u.MarshalJSON()
		_, _ = w.Write(b)
	case http.MethodDelete:
		WriteStatus(w, http.StatusNotFound, "NotFound", `widgets "w" not found`)
	default:
		_, _ = w.Write([]byte(`{"kind":"Widget","apiVersion":"example.setpoint.dev/v1","metadata":{"name":"w","managedFields":[{"manager":"m"}]}}`))
	}
}

const widgetBody = `{"kind":"Widget","apiVersion":"example.setpoint.dev/v1","metadata":{"name":"w","namespace":"ns1","managedFields":[{"manager":"kubectl"}]},"spec":{"size":"small"}}`

type auditReq struct {
	method, path, token, body string
	header                    http.Header
}

func (q auditReq) do(t *testing.T, h http.Handler) int {
	t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	req := httptest.NewRequest(q.method, q.path, body)
	if q.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "audit-test/1")
	req.RemoteAddr = "192.0.2.7:1234"
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		req.Header[k] = v
	}
	rec := recorder{httptest.NewRecorder()}
	func() {
		defer func() { _ = recover() }() // Instrument answers 500; a test handler may re-panic
		h.ServeHTTP(rec, req)
	}()
	return rec.Code
}

// recorder is an httptest.ResponseRecorder that is an http.CloseNotifier,
// as the server's writers are (the audit layer keeps http.Flusher only
// then).
type recorder struct{ *httptest.ResponseRecorder }

func (recorder) CloseNotify() <-chan bool { return make(chan bool) } //nolint:staticcheck // as net/http's writers

// TestAuditPolicy checks levels, omitStages and rules by user, group,
// verb, resource and namespace: which events each request gets and what
// they hold.
func TestAuditPolicy(t *testing.T) {
	const policyYAML = `
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["nobody-audits-me"]
- level: None
  verbs: ["list"]
  resources: [{group: "example.setpoint.dev", resources: ["gadgets"]}]
- level: Metadata
  namespaces: ["meta"]
- level: Request
  verbs: ["create"]
  namespaces: ["ns1"]
  omitStages: [ResponseComplete]
- level: RequestResponse
  userGroups: ["system:masters"]
  resources: [{group: "example.setpoint.dev", resources: ["widgets"], resourceNames: ["w"]}]
  omitManagedFields: true
- level: Metadata
  nonResourceURLs: ["/healthz*"]
`
	tests := []struct {
		name string
		req  auditReq
		code int
		want []auditv1.Stage
		// check looks at the last event.
		check func(t *testing.T, ev auditv1.Event)
	}{
		{
			name: "metadata: user, source IPs, user agent, objectRef, status",
			req:  auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets/w", token: testToken},
			code: 200, want: []auditv1.Stage{auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				want := auditv1.Event{
					Level: auditv1.LevelMetadata, Stage: auditv1.StageResponseComplete, Verb: "get",
					RequestURI: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets/w",
					SourceIPs:  []string{"192.0.2.7"}, UserAgent: "audit-test/1",
					ObjectRef: &auditv1.ObjectReference{Resource: "widgets", Namespace: "meta", Name: "w",
						APIGroup: "example.setpoint.dev", APIVersion: "v1"},
					ResponseStatus: &metav1.Status{Code: 200},
				}
				want.User.Username, want.User.Groups = AdminUser.Name, AdminUser.Groups
				// The authorization layer's decision (the admin is in system:masters).
				want.Annotations = map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
				ev.TypeMeta, ev.AuditID, ev.RequestReceivedTimestamp, ev.StageTimestamp, ev.User.Extra = metav1.TypeMeta{}, "", metav1.MicroTime{}, metav1.MicroTime{}, nil
				if d := cmp.Diff(want, ev); d != "" {
					t.Errorf("event (-want +got):\n%s", d)
				}
			},
		},
		{
			name: "request level: the body, and a create's name; ResponseComplete omitted by the rule",
			req:  auditReq{method: "POST", path: "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets", token: testToken, body: widgetBody},
			code: 201, want: nil,
		},
		{
			name: "metadata level: a create's name from its body, no body",
			req:  auditReq{method: "POST", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets", token: testToken, body: widgetBody},
			code: 201, want: []auditv1.Stage{auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				if ev.Level != auditv1.LevelMetadata || ev.RequestObject != nil || ev.ResponseObject != nil || ev.ObjectRef == nil || ev.ObjectRef.Name != "w" {
					t.Errorf("level %s objectRef %+v requestObject %s responseObject %v", ev.Level, ev.ObjectRef, raw(ev.RequestObject), ev.ResponseObject)
				}
			},
		},
		{
			name: "request level on a failed create: responseStatus from the Status",
			req:  auditReq{method: "POST", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets", token: testToken, body: `{"not":"an object"}`},
			code: 400, want: []auditv1.Stage{auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				if ev.Level != auditv1.LevelMetadata || ev.RequestObject != nil {
					t.Errorf("level %s, requestObject %v; want Metadata and none", ev.Level, ev.RequestObject)
				}
				if st := ev.ResponseStatus; st == nil || st.Code != 400 || st.Reason != "BadRequest" || st.Message != "not an object" {
					t.Errorf("responseStatus %+v", st)
				}
			},
		},
		{
			name: "request-response by group and resourceName, managed fields omitted",
			req:  auditReq{method: "PUT", path: "/apis/example.setpoint.dev/v1/namespaces/ns2/widgets/w", token: testToken, body: widgetBody},
			code: 200, want: []auditv1.Stage{auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				if ev.Level != auditv1.LevelRequestResponse || ev.Verb != "update" {
					t.Fatalf("level %s verb %s", ev.Level, ev.Verb)
				}
				for name, obj := range map[string][]byte{"request": raw(ev.RequestObject), "response": raw(ev.ResponseObject)} {
					if !strings.Contains(string(obj), `"name":"w"`) || strings.Contains(string(obj), "managedFields") {
						t.Errorf("%sObject %s: want the object without managedFields", name, obj)
					}
				}
			},
		},
		{
			name: "another widget name is not audited (no rule matches)",
			req:  auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/ns2/widgets/other", token: testToken},
			code: 200,
		},
		{
			name: "none by verb and resource",
			req:  auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/gadgets", token: testToken},
			code: 200,
		},
		{
			name: "non-resource URL, anonymous",
			req:  auditReq{method: "GET", path: "/healthz"},
			code: 200, want: []auditv1.Stage{auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				if ev.ObjectRef != nil || ev.User.Username != "system:anonymous" || !slices.Equal(ev.User.Groups, []string{"system:unauthenticated"}) || ev.RequestURI != "/healthz" {
					t.Errorf("objectRef %v, user %+v, uri %q", ev.ObjectRef, ev.User, ev.RequestURI)
				}
			},
		},
		{
			name: "a refused token: one ResponseStarted event, as kube-apiserver",
			req:  auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets", token: "wrong"},
			code: 401, want: []auditv1.Stage{auditv1.StageResponseStarted},
			check: func(t *testing.T, ev auditv1.Event) {
				if st := ev.ResponseStatus; st == nil || st.Code != 401 || st.Message != "Authentication failed, attempted: bearer" {
					t.Errorf("responseStatus %+v", st)
				}
				if ev.User.Username != "" || ev.Verb != "list" || ev.ObjectRef == nil || ev.ObjectRef.Namespace != "meta" {
					t.Errorf("user %q verb %q objectRef %+v", ev.User.Username, ev.Verb, ev.ObjectRef)
				}
			},
		},
		{
			name: "a panic: the Panic stage with a 500",
			req:  auditReq{method: "GET", path: "/api/v1/namespaces/meta/configmaps/panic", token: testToken},
			code: 500, want: []auditv1.Stage{auditv1.StagePanic},
			check: func(t *testing.T, ev auditv1.Event) {
				if st := ev.ResponseStatus; st == nil || st.Code != 500 || !strings.Contains(st.Message, "boom") {
					t.Errorf("responseStatus %+v", st)
				}
			},
		},
		{
			name: "a watch: ResponseStarted, then ResponseComplete",
			req:  auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets?watch=true", token: testToken},
			code: 200, want: []auditv1.Stage{auditv1.StageResponseStarted, auditv1.StageResponseComplete},
			check: func(t *testing.T, ev auditv1.Event) {
				if ev.Verb != "watch" || ev.ResponseObject != nil {
					t.Errorf("verb %q, responseObject %v", ev.Verb, ev.ResponseObject)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &auditLog{}
			a := newAuditor(t, policyYAML, out, 0, nil)
			h := NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if code := tt.req.do(t, h); code != tt.code {
				t.Fatalf("code %d, want %d", code, tt.code)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			evs := out.events(t)
			var stages []auditv1.Stage
			for _, ev := range evs {
				stages = append(stages, ev.Stage)
				if ev.AuditID != evs[0].AuditID {
					t.Errorf("audit IDs %q and %q in one request", evs[0].AuditID, ev.AuditID)
				}
			}
			if !slices.Equal(stages, tt.want) {
				t.Fatalf("stages %v, want %v; log:\n%s", stages, tt.want, out.String())
			}
			if tt.check != nil && len(evs) > 0 {
				tt.check(t, evs[len(evs)-1])
			}
		})
	}
}

func raw(u *runtime.Unknown) []byte {
	if u == nil {
		return nil
	}
	return u.Raw
}

// TestAuditRequestLevel checks what the Request level records: the body as
// the requestObject and the name it gives objectRef, at ResponseComplete
// (RequestReceived is recorded before the body is read, as in
// kube-apiserver).
func TestAuditRequestLevel(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n", out, 0, nil)
	h := NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	q := auditReq{method: "POST", path: "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets", token: testToken, body: widgetBody,
		header: http.Header{"Audit-Id": {"my-audit-id"}}}
	if code := q.do(t, h); code != 201 {
		t.Fatalf("create: %d", code)
	}
	_ = a.Close()
	evs := out.events(t)
	if len(evs) != 2 || evs[0].Stage != auditv1.StageRequestReceived || evs[1].Stage != auditv1.StageResponseComplete {
		t.Fatalf("events %s", out.String())
	}
	if ev := evs[0]; ev.AuditID != "my-audit-id" || ev.RequestObject != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != "ns1" {
		t.Errorf("RequestReceived: auditID %q objectRef %+v requestObject %s", ev.AuditID, ev.ObjectRef, raw(ev.RequestObject))
	}
	ev := evs[1]
	if ev.AuditID != "my-audit-id" || ev.ObjectRef == nil || ev.ObjectRef.Name != "w" || ev.ObjectRef.Namespace != "ns1" {
		t.Errorf("ResponseComplete: auditID %q objectRef %+v", ev.AuditID, ev.ObjectRef)
	}
	if got := string(raw(ev.RequestObject)); !strings.Contains(got, `"size":"small"`) || !strings.Contains(got, "managedFields") {
		t.Errorf("requestObject %s; want the body as sent", got)
	}
	if ev.ResponseObject != nil {
		t.Errorf("responseObject at level Request")
	}
	if st := evs[1].ResponseStatus; st == nil || st.Code != 201 {
		t.Errorf("responseStatus %+v", st)
	}
}

// TestAuditWebSocketWatch checks that a watch over WebSocket (a hijacked
// connection) gets ResponseStarted with 101 when it upgrades and
// ResponseComplete when it ends.
func TestAuditWebSocketWatch(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n", out, 0, nil)
	srv := httptest.NewServer(NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets?watch=true"
	// A token subprotocol goes with the one the client speaks.
	c, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Sec-WebSocket-Protocol": {wsProtocol(testToken) + ", setpoint.watch.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.ReadMessage(); err != nil || !strings.Contains(string(msg), "ADDED") {
		t.Fatalf("read: %q %v", msg, err)
	}
	testsupport.Poll(t, 10*time.Second, "ResponseStarted", func() (bool, string) {
		evs := out.events(t)
		return len(evs) == 2, out.String()
	})
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	c.Close()
	testsupport.Poll(t, 10*time.Second, "ResponseComplete", func() (bool, string) {
		evs := out.events(t)
		return len(evs) == 3, out.String()
	})
	evs := out.events(t)
	for i, want := range []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete} {
		ev := evs[i]
		if ev.Stage != want || ev.Verb != "watch" || ev.User.Username != AdminUser.Name || ev.ResponseObject != nil {
			t.Errorf("event %d: stage %s verb %s user %q responseObject %v", i, ev.Stage, ev.Verb, ev.User.Username, ev.ResponseObject)
		}
		if i > 0 && (ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusSwitchingProtocols) {
			t.Errorf("event %d: responseStatus %+v, want 101", i, ev.ResponseStatus)
		}
	}
}

// blockingWriter blocks every write until release is closed.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	lines   int
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	w.lines++
	w.mu.Unlock()
	return len(b), nil
}

// TestAuditBufferDropsWhenTheLogBlocks checks that a log that does not
// take writes never holds requests up: past the buffer, events are
// dropped and counted.
func TestAuditBufferDropsWhenTheLogBlocks(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	const buffer = 4
	p, err := policy.LoadPolicyFromBytes([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := NewAuditor(AuditOptions{Policy: p, Out: out, BufferSize: buffer, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	unblock := func() { release.Do(func() { close(out.release) }) }
	t.Cleanup(func() { unblock(); _ = a.Close() })
	h := NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const requests = 20 // two events each
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range requests {
			auditReq{method: "GET", path: "/api/v1/namespaces/default/configmaps/x", token: testToken}.do(t, h)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("requests blocked on the audit log")
	}
	dropped := testutil.ToFloat64(a.sink.dropped)
	// The writer holds one event, the buffer four: the rest are dropped.
	if want := float64(2*requests - buffer - 1); dropped < want {
		t.Errorf("dropped %v events, want at least %v", dropped, want)
	}
	// Logged once, not once per event.
	if n := strings.Count(logs.String(), "audit events dropped"); n != 1 {
		t.Errorf("the drops were logged %d times, want once:\n%s", n, logs.String())
	}
	if n, err := testutil.GatherAndCount(reg, "setpoint_audit_events_dropped_total"); err != nil || n != 1 {
		t.Errorf("setpoint_audit_events_dropped_total registered: %d %v", n, err)
	}
	unblock()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := float64(out.lines), 2*requests-dropped; got != want {
		t.Errorf("wrote %v events, want %v (all but the dropped)", got, want)
	}
	if got := testutil.ToFloat64(a.sink.written); got != float64(out.lines) {
		t.Errorf("setpoint_audit_events_total %v, want %d", got, out.lines)
	}
}

// TestAuditWrite checks the events of writes made inside the server.
func TestAuditWrite(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, `
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  verbs: ["delete"]
- level: RequestResponse
  users: ["system:setpoint:plugin:widget"]
  omitManagedFields: true
`, out, 0, nil)
	plugin := &user.DefaultInfo{Name: "system:setpoint:plugin:widget", Groups: []string{"system:setpoint:plugins", user.AllAuthenticated}}
	attrs := authorizer.AttributesRecord{User: plugin, Verb: "update", APIGroup: "example.setpoint.dev", APIVersion: "v1",
		Resource: "widgets", Subresource: "status", Namespace: "ns1", Name: "w", ResourceRequest: true}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(widgetBody)); err != nil {
		t.Fatal(err)
	}
	done := a.AuditWrite(context.Background(), attrs, obj)
	stored := obj.DeepCopy()
	stored.SetUID("u1")
	stored.SetResourceVersion("9")
	done(stored, nil)

	conflict := a.AuditWrite(context.Background(), authorizer.AttributesRecord{User: plugin, Verb: "create", APIVersion: "v1",
		Resource: "events", Namespace: "ns1", ResourceRequest: true}, nil)
	conflict(nil, errStatus(409, metav1.StatusReasonAlreadyExists, "exists"))
	a.AuditWrite(context.Background(), authorizer.AttributesRecord{User: plugin, Verb: "delete", Resource: "widgets", ResourceRequest: true}, nil)(nil, nil)
	_ = a.Close()

	evs := out.events(t)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4 (the delete is not audited):\n%s", len(evs), out.String())
	}
	ev := evs[1]
	if ev.Stage != auditv1.StageResponseComplete || ev.AuditID != evs[0].AuditID || ev.Verb != "update" ||
		ev.RequestURI != "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets/w/status" || ev.UserAgent != InProcessUserAgent ||
		ev.User.Username != plugin.Name || !slices.Equal(ev.User.Groups, plugin.Groups) {
		t.Errorf("update event: %+v", ev)
	}
	if r := ev.ObjectRef; r == nil || r.Name != "w" || r.UID != "u1" || r.ResourceVersion != "9" || r.Subresource != "status" {
		t.Errorf("objectRef %+v", ev.ObjectRef)
	}
	if b := string(raw(ev.ResponseObject)); !strings.Contains(b, `"uid":"u1"`) || strings.Contains(b, "managedFields") {
		t.Errorf("responseObject %s", b)
	}
	if b := string(raw(ev.RequestObject)); !strings.Contains(b, `"size":"small"`) || strings.Contains(b, "managedFields") {
		t.Errorf("requestObject %s", b)
	}
	if st := evs[3].ResponseStatus; st == nil || st.Code != 409 || st.Reason != metav1.StatusReasonAlreadyExists || evs[3].RequestURI != "/api/v1/namespaces/ns1/events" {
		t.Errorf("failed create: %+v %q", st, evs[3].RequestURI)
	}
}

func errStatus(code int32, reason metav1.StatusReason, msg string) error {
	return &statusErr{metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

type statusErr struct{ s metav1.Status }

func (e *statusErr) Error() string         { return e.s.Message }
func (e *statusErr) Status() metav1.Status { return e.s }

// TestAuditProtobufBody checks that a typed client's protobuf body (kubectl
// create namespace) names the object in objectRef and is recorded as JSON.
func TestAuditProtobufBody(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n", out, 0, nil)
	h := NewHandler(HandlerOptions{API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}), Token: testToken, Audit: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	var body bytes.Buffer
	if err := protobufDecoder.Encode(ns, &body); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/api/v1/namespaces", &body)
	req.Header.Set("Content-Type", protobufType)
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := recorder{httptest.NewRecorder()}
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d", rec.Code)
	}
	_ = a.Close()
	evs := out.events(t)
	ev := evs[len(evs)-1]
	if ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil || ev.ObjectRef.Name != "team-a" {
		t.Fatalf("event: %s", out.String())
	}
	if got := string(raw(ev.RequestObject)); !strings.Contains(got, `"kind":"Namespace"`) || !strings.Contains(got, `"name":"team-a"`) {
		t.Errorf("requestObject %s", got)
	}
}

// TestAuditKeepsResponseController checks that the API still reaches the
// connection through the audit layer's writers: write deadlines (watches
// use them) and flushing.
func TestAuditKeepsResponseController(t *testing.T) {
	for _, level := range []string{"Metadata", "RequestResponse"} {
		t.Run(level, func(t *testing.T) {
			a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: "+level+"\n", &auditLog{}, 0, nil)
			srv := httptest.NewServer(NewHandler(HandlerOptions{API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
					t.Errorf("SetWriteDeadline: %v", err)
				}
				_, _ = w.Write([]byte("{}"))
				if err := rc.Flush(); err != nil {
					t.Errorf("Flush: %v", err)
				}
			}), Token: testToken, Audit: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
			defer srv.Close()
			for _, path := range []string{"/api/v1/namespaces/default/configmaps/x", "/api/v1/namespaces/default/configmaps?watch=true"} {
				if code, _ := do(t, "GET", srv.URL+path, testToken, nil); code != http.StatusOK {
					t.Errorf("GET %s: %d", path, code)
				}
			}
		})
	}
}

// TestAuditHammer sends concurrent requests and in-process writes through
// one Auditor (run it with -race): every event is written once, whole.
func TestAuditHammer(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n", out, 0, nil)
	h := NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if w%2 == 0 {
					auditReq{method: "PUT", path: "/apis/example.setpoint.dev/v1/namespaces/ns/widgets/w", token: testToken, body: widgetBody}.do(t, h)
					continue
				}
				a.AuditWrite(context.Background(), authorizer.AttributesRecord{Verb: "create", Resource: "events", Namespace: "ns",
					Name: fmt.Sprint(i), ResourceRequest: true}, nil)(nil, nil)
			}
		}()
	}
	wg.Wait()
	_ = a.Close()
	requests := map[string]int{}
	for _, ev := range out.events(t) {
		requests[string(ev.AuditID)]++
	}
	if len(requests) != workers*each {
		t.Fatalf("%d requests audited, want %d", len(requests), workers*each)
	}
	for id, n := range requests {
		if n != 2 {
			t.Errorf("request %s: %d events, want 2", id, n)
		}
	}
}

// TestAuditRecordsAuthorization checks that the authorization layer's
// decision reaches the event, and that a denied request is audited with
// its 403.
func TestAuditRecordsAuthorization(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n", out, 0, nil)
	deny := authorizer.AuthorizerFunc(func(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
		if attrs.GetVerb() == "delete" {
			return authorizer.DecisionDeny, "no deletes here", nil
		}
		return authorizer.DecisionAllow, "all but deletes", nil
	})
	// The layers of NewHandler, with a user outside system:masters (whom
	// every request is allowed).
	ann := &user.DefaultInfo{Name: "ann", Groups: []string{user.AllAuthenticated}}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), ann)))
		})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := Instrument(a.WrapAuthentication(authenticate(a.Wrap(Authorize(http.HandlerFunc(auditAPI), deny, log)))), InstrumentOptions{Logger: log})
	auditReq{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/ns/widgets/w", token: testToken}.do(t, h)
	if code := (auditReq{method: "DELETE", path: "/apis/example.setpoint.dev/v1/namespaces/ns/widgets/w", token: testToken}).do(t, h); code != http.StatusForbidden {
		t.Fatalf("delete: %d, want 403", code)
	}
	_ = a.Close()
	evs := out.events(t)
	if len(evs) != 2 {
		t.Fatalf("events:\n%s", out.String())
	}
	for i, want := range []struct {
		decision, reason string
		code             int32
	}{{"allow", "all but deletes", 200}, {"forbid", "no deletes here", 403}} {
		ev := evs[i]
		if ev.Annotations["authorization.k8s.io/decision"] != want.decision || ev.Annotations["authorization.k8s.io/reason"] != want.reason ||
			ev.ResponseStatus == nil || ev.ResponseStatus.Code != want.code {
			t.Errorf("%s: annotations %v status %+v; want %s (%s) %d", ev.Verb, ev.Annotations, ev.ResponseStatus, want.decision, want.reason, want.code)
		}
	}
	if st := evs[1].ResponseStatus; st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, "no deletes here") {
		t.Errorf("denied delete's status %+v", st)
	}
}

// TestAuditWrapAlone checks that Wrap audits on its own too, giving the
// request its audit ID (echoed in the Audit-Id header) when no
// WrapAuthentication did.
func TestAuditWrapAlone(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n", out, 0, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := Instrument(a.Wrap(http.HandlerFunc(auditAPI)), InstrumentOptions{Logger: log})
	req := httptest.NewRequest("GET", "/apis/example.setpoint.dev/v1/namespaces/ns/widgets/w", nil)
	rec := recorder{httptest.NewRecorder()}
	h.ServeHTTP(rec, req)
	_ = a.Close()
	evs := out.events(t)
	id := rec.Header().Get("Audit-Id")
	if len(evs) != 2 || id == "" || string(evs[0].AuditID) != id || string(evs[1].AuditID) != id {
		t.Fatalf("Audit-Id %q, events:\n%s", id, out.String())
	}
}

// TestAuditAnonymousUser checks that a request served without credentials
// is audited as kube-apiserver audits it, as system:anonymous in the group
// system:unauthenticated, that policy rules by that group match it, and
// that the handlers past the audit layer still see a request without a
// user (impersonation headers dropped, no authorization).
func TestAuditAnonymousUser(t *testing.T) {
	const policyYAML = `
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:unauthenticated"]
`
	out := &auditLog{}
	a := newAuditor(t, policyYAML, out, 0, nil)
	var sawUser atomic.Bool
	var sawImpersonate atomic.Bool
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := request.UserFrom(r.Context()); ok && r.URL.Path == "/version" {
			sawUser.Store(true)
		}
		if r.Header.Get("Impersonate-User") != "" {
			sawImpersonate.Store(true)
		}
		auditAPI(w, r)
	})
	h := NewHandler(HandlerOptions{API: api, Token: testToken, Audit: a,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, q := range []auditReq{
		{method: "GET", path: "/version", header: http.Header{"Impersonate-User": {"setpoint-admin"}}},
		{method: "GET", path: "/apis/example.setpoint.dev/v1/namespaces/meta/widgets/w", token: testToken},
	} {
		if code := q.do(t, h); code != http.StatusOK {
			t.Fatalf("%s: code %d", q.path, code)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if sawUser.Load() || sawImpersonate.Load() {
		t.Errorf("the handler saw a user (%v) or an impersonation header (%v) on /version", sawUser.Load(), sawImpersonate.Load())
	}
	evs := out.events(t)
	if len(evs) != 1 {
		t.Fatalf("want one event (the admin is not in the rule's group), log:\n%s", out.String())
	}
	ev := evs[0]
	if ev.RequestURI != "/version" || ev.User.Username != user.Anonymous || !slices.Equal(ev.User.Groups, []string{user.AllUnauthenticated}) || ev.ImpersonatedUser != nil {
		t.Errorf("event uri %q user %+v impersonated %+v", ev.RequestURI, ev.User, ev.ImpersonatedUser)
	}
}
