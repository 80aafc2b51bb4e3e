package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// auditPolicy records Widgets and their children in full, leaves out the
// probes and Leases, and records the rest at Metadata.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: RequestResponse
  resources: [{group: example.setpoint.dev, resources: [widgets, widgets/status, widgetprovisions]}]
  omitManagedFields: true
- level: Metadata
`

const (
	adminUser  = "setpoint-admin"
	widgetUser = "system:setpoint:plugin:widget"
)

// auditDir reads the audit log and its rotated backups.
type auditDir struct {
	dir  string
	path string
}

// files lists the backups, oldest first, then the log.
func (a auditDir) files(t *testing.T) []string {
	t.Helper()
	backups, err := filepath.Glob(filepath.Join(a.dir, "audit-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(backups) // named by rotation time
	return append(backups, a.path)
}

// events parses every complete line written so far.
func (a auditDir) events(t *testing.T) []auditv1.Event {
	t.Helper()
	var out []auditv1.Event
	for _, f := range a.files(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1] // a line being written is not complete yet
		} else {
			b = nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: line %.300s: %v", f, sc.Text(), err)
			}
			if ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" {
				t.Fatalf("%s: line %.300s: apiVersion %q kind %q", f, sc.Text(), ev.APIVersion, ev.Kind)
			}
			out = append(out, ev)
		}
	}
	return out
}

// wait polls until match picks at least n events, and returns them.
func (a auditDir) wait(t *testing.T, what string, n int, match func(auditv1.Event) bool) []auditv1.Event {
	t.Helper()
	var got []auditv1.Event
	testsupport.Poll(t, 20*time.Second, what, func() (bool, string) {
		got = got[:0]
		for _, ev := range a.events(t) {
			if match(ev) {
				got = append(got, ev)
			}
		}
		return len(got) >= n, fmt.Sprintf("%d of %d events", len(got), n)
	})
	return got
}

// byAuditID groups events by request, in order.
func byAuditID(evs []auditv1.Event) map[string][]auditv1.Event {
	m := map[string][]auditv1.Event{}
	for _, ev := range evs {
		m[string(ev.AuditID)] = append(m[string(ev.AuditID)], ev)
	}
	return m
}

func stagesOf(evs []auditv1.Event) []auditv1.Stage {
	var s []auditv1.Stage
	for _, ev := range evs {
		s = append(s, ev.Stage)
	}
	return s
}

// TestAudit runs one server with an audit policy and checks the audit log
// for kubectl's requests, watches over HTTP and WebSocket, a refused
// token, impersonation, and the widget plugin's writes; a small maximum
// size rotates the log.
func TestAudit(t *testing.T) {
	wasm := wasmModule(t, "widget-plugin")
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	log := auditDir{dir: filepath.Join(dir, "log"), path: filepath.Join(dir, "log", "audit.log")}
	if err := os.Mkdir(log.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{
		"--audit-policy-file", policyFile, "--audit-log-path", log.path,
		"--audit-log-maxsize", "1", "--audit-log-maxbackup", "20",
	}})
	installWidgetPlugin(t, s, wasm)

	t.Run("kubectl create, get and delete", func(t *testing.T) {
		if out, errOut, err := s.KubectlInput(auditWidget("audited", ""), "create", "-f", "-"); err != nil {
			t.Fatalf("kubectl create: %v\n%s%s", err, out, errOut)
		}
		waitWidget(t, s, "audited", "Ready")
		if out, errOut, err := s.Kubectl("get", "widget", "audited", "-o", "json"); err != nil {
			t.Fatalf("kubectl get: %v\n%s%s", err, out, errOut)
		}
		if out, errOut, err := s.Kubectl("delete", "widget", "audited", "--wait=false"); err != nil {
			t.Fatalf("kubectl delete: %v\n%s%s", err, out, errOut)
		}
		mine := func(verb string) func(auditv1.Event) bool {
			return func(ev auditv1.Event) bool {
				return ev.Verb == verb && ev.User.Username == adminUser && ev.ObjectRef != nil &&
					ev.ObjectRef.Resource == "widgets" && ev.ObjectRef.Name == "audited" && ev.Stage == auditv1.StageResponseComplete
			}
		}
		create := log.wait(t, "the create's ResponseComplete", 1, mine("create"))[0]
		requests := byAuditID(log.events(t))
		if got := stagesOf(requests[string(create.AuditID)]); !slices.Equal(got, []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseComplete}) {
			t.Errorf("create stages %v", got)
		}
		if create.Level != auditv1.LevelRequestResponse || create.RequestURI != "/apis/example.setpoint.dev/v1/namespaces/default/widgets?fieldManager=kubectl-create&fieldValidation=Strict" ||
			!slices.Equal(create.SourceIPs, []string{"127.0.0.1"}) || !strings.HasPrefix(create.UserAgent, "kubectl/") ||
			!slices.Contains(create.User.Groups, "system:masters") || create.ImpersonatedUser != nil {
			t.Errorf("create event: level %s uri %q sourceIPs %v userAgent %q groups %v impersonated %v",
				create.Level, create.RequestURI, create.SourceIPs, create.UserAgent, create.User.Groups, create.ImpersonatedUser)
		}
		ref := create.ObjectRef
		if ref.Namespace != "default" || ref.APIGroup != "example.setpoint.dev" || ref.APIVersion != "v1" || ref.UID != "" {
			t.Errorf("create objectRef %+v", ref)
		}
		if st := create.ResponseStatus; st == nil || st.Code != http.StatusCreated {
			t.Errorf("create responseStatus %+v", st)
		}
		if d := create.Annotations["authorization.k8s.io/decision"]; d != "allow" {
			t.Errorf("create's authorization decision %q, want allow", d)
		}
		if create.RequestObject == nil || !strings.Contains(string(create.RequestObject.Raw), `"size":"small"`) {
			t.Errorf("create requestObject %v", create.RequestObject)
		}
		if create.ResponseObject == nil || !strings.Contains(string(create.ResponseObject.Raw), `"uid":`) ||
			strings.Contains(string(create.ResponseObject.Raw), "managedFields") {
			t.Errorf("create responseObject (want the stored object without managedFields): %s", create.ResponseObject.Raw)
		}
		if !create.StageTimestamp.After(create.RequestReceivedTimestamp.Time) && !create.StageTimestamp.Equal(&create.RequestReceivedTimestamp) {
			t.Errorf("stageTimestamp %v before requestReceivedTimestamp %v", create.StageTimestamp, create.RequestReceivedTimestamp)
		}
		get := log.wait(t, "the get", 1, mine("get"))[0]
		if get.ResponseStatus == nil || get.ResponseStatus.Code != http.StatusOK || get.RequestObject != nil || get.ResponseObject == nil {
			t.Errorf("get event: status %+v requestObject %v responseObject %v", get.ResponseStatus, get.RequestObject, get.ResponseObject)
		}
		del := log.wait(t, "the delete", 1, mine("delete"))[0]
		if del.ResponseStatus == nil || del.ResponseStatus.Code != http.StatusOK {
			t.Errorf("delete event: status %+v", del.ResponseStatus)
		}
	})

	t.Run("the plugin's writes as its user", func(t *testing.T) {
		byPlugin := func(ev auditv1.Event) bool {
			return ev.User.Username == widgetUser && ev.Stage == auditv1.StageResponseComplete && ev.ObjectRef != nil
		}
		// A reconcile that ran again before the informer saw the child may
		// also have tried to create it and been answered 409, audited as
		// such: the events looked at are the create that made the child and
		// the status write.
		made := func(ev auditv1.Event) bool {
			return ev.ResponseStatus != nil && ev.ResponseStatus.Code != http.StatusConflict
		}
		evs := log.wait(t, "the widget plugin's child and status writes", 2, func(ev auditv1.Event) bool {
			return byPlugin(ev) && (ev.ObjectRef.Resource == "widgetprovisions" && ev.Verb == "create" && made(ev) ||
				ev.ObjectRef.Resource == "widgets" && ev.ObjectRef.Subresource == "status" && ev.ObjectRef.Name == "audited")
		})
		for _, ev := range evs {
			if !slices.Equal(ev.User.Groups, []string{"system:setpoint:plugins", "system:authenticated"}) ||
				ev.UserAgent != "setpoint/in-process" || ev.Level != auditv1.LevelRequestResponse ||
				ev.ResponseStatus == nil || ev.ResponseStatus.Code >= 300 || ev.ResponseObject == nil || ev.ObjectRef.Namespace != "default" {
				t.Errorf("plugin write: %+v", ev)
			}
			if ev.ObjectRef.Resource == "widgetprovisions" && (ev.RequestURI != "/apis/example.setpoint.dev/v1/namespaces/default/widgetprovisions" || ev.ResponseStatus.Code != http.StatusCreated) {
				t.Errorf("child create: uri %q status %+v", ev.RequestURI, ev.ResponseStatus)
			}
		}
		if requests := byAuditID(log.events(t)); len(requests[string(evs[0].AuditID)]) != 2 {
			t.Errorf("plugin write stages %v, want RequestReceived and ResponseComplete", stagesOf(requests[string(evs[0].AuditID)]))
		}
	})

	t.Run("the server's own writes as its system users", func(t *testing.T) {
		// The widget deleted above had a child, which the garbage collector
		// deletes (a cascading delete); the plugin manager wrote the
		// Plugin's status when it loaded it.
		system := func(user, verb, resource, sub string) func(auditv1.Event) bool {
			return func(ev auditv1.Event) bool {
				return ev.User.Username == user && ev.Verb == verb && ev.Stage == auditv1.StageResponseComplete &&
					ev.ObjectRef != nil && ev.ObjectRef.Resource == resource && ev.ObjectRef.Subresource == sub
			}
		}
		child := log.wait(t, "the garbage collector's delete of the widget's child", 1, func(ev auditv1.Event) bool {
			return system("system:setpoint:garbage-collector", "delete", "widgetprovisions", "")(ev) &&
				ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusOK
		})[0]
		status := log.wait(t, "the plugin manager's status write of the Plugin", 1, func(ev auditv1.Event) bool {
			return system("system:setpoint:plugin-manager", "update", "plugins", "status")(ev) && ev.ObjectRef.Name == "widget"
		})[0]
		// At its first start the server wrote the default namespace and
		// the default roles.
		ns := log.wait(t, "the server's create of the default namespace", 1, func(ev auditv1.Event) bool {
			return system("system:setpoint:apiserver", "create", "namespaces", "")(ev) && ev.ObjectRef.Name == "default"
		})[0]
		role := log.wait(t, "the default roles", 1, func(ev auditv1.Event) bool {
			return system("system:setpoint:rbac", "create", "clusterroles", "")(ev) && ev.ObjectRef.Name == "view"
		})[0]
		if role.ResponseStatus == nil || role.ResponseStatus.Code != http.StatusCreated || ns.ResponseStatus == nil || ns.ResponseStatus.Code != http.StatusCreated {
			t.Errorf("bootstrap writes: the view ClusterRole's %+v, the default namespace's %+v", role.ResponseStatus, ns.ResponseStatus)
		}
		for _, ev := range []auditv1.Event{child, status} {
			if !slices.Equal(ev.User.Groups, []string{"system:setpoint:system", "system:authenticated"}) ||
				ev.UserAgent != "setpoint/in-process" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusOK ||
				ev.ObjectRef.Name == "" || ev.ObjectRef.UID == "" || len(ev.SourceIPs) != 0 {
				t.Errorf("%s %s/%s by %s: %+v", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Subresource, ev.User.Username, ev)
			}
		}
		// The child is recorded at RequestResponse by the policy: the
		// delete's options, as over the API; the Plugin at Metadata: no
		// body at all.
		if child.Level != auditv1.LevelRequestResponse || child.ObjectRef.Namespace != "default" ||
			child.RequestURI != "/apis/example.setpoint.dev/v1/namespaces/default/widgetprovisions/"+child.ObjectRef.Name ||
			child.RequestObject == nil || !strings.Contains(string(child.RequestObject.Raw), `"kind":"DeleteOptions"`) {
			t.Errorf("the child's delete: level %s uri %q requestObject %v", child.Level, child.RequestURI, child.RequestObject)
		}
		// The plugin's own writes are its user's alone: none is recorded
		// again as a system user's.
		for _, ev := range log.events(t) {
			if slices.Contains(ev.User.Groups, "system:setpoint:system") && ev.ObjectRef != nil && ev.Verb != "delete" &&
				(ev.ObjectRef.Resource == "widgets" || ev.ObjectRef.Resource == "widgetprovisions") {
				t.Errorf("the plugin's write %s %s/%s recorded as %s", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.User.Username)
			}
		}
		if status.Level != auditv1.LevelMetadata || status.RequestObject != nil || status.ResponseObject != nil ||
			status.RequestURI != "/apis/setpoint.dev/v1alpha1/plugins/widget/status" {
			t.Errorf("the Plugin's status write: level %s uri %q requestObject %v responseObject %v",
				status.Level, status.RequestURI, status.RequestObject, status.ResponseObject)
		}
	})

	t.Run("watch over HTTP", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := s.Command(ctx, testserver.Kubectl, "get", "widgets", "--watch", "-o", "name")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		watch := func(ev auditv1.Event) bool {
			return ev.Verb == "watch" && strings.HasPrefix(ev.UserAgent, "kubectl/") && ev.ObjectRef != nil && ev.ObjectRef.Resource == "widgets"
		}
		started := log.wait(t, "the watch's ResponseStarted", 1, func(ev auditv1.Event) bool {
			return watch(ev) && ev.Stage == auditv1.StageResponseStarted
		})[0]
		cancel()
		_ = cmd.Wait()
		if started.ResponseStatus == nil || started.ResponseStatus.Code != http.StatusOK || started.Level != auditv1.LevelRequestResponse || started.ResponseObject != nil {
			t.Errorf("ResponseStarted: %+v", started)
		}
		done := log.wait(t, "the watch's ResponseComplete", 1, func(ev auditv1.Event) bool {
			return ev.AuditID == started.AuditID && ev.Stage == auditv1.StageResponseComplete
		})[0]
		if done.ResponseObject != nil {
			t.Errorf("a watch's ResponseComplete holds a responseObject")
		}
	})

	t.Run("watch over WebSocket", func(t *testing.T) {
		c, resp, err := wsDial(s, wsWidgetsPath, nil, http.Header{"User-Agent": {"audit-ws-test"}}, wsTokenProtocol(s.Token), wsProtocol)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		isWS := func(ev auditv1.Event) bool { return ev.UserAgent == "audit-ws-test" && ev.Verb == "watch" }
		started := log.wait(t, "the WebSocket watch's ResponseStarted", 1, func(ev auditv1.Event) bool {
			return isWS(ev) && ev.Stage == auditv1.StageResponseStarted
		})[0]
		_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		c.Close()
		done := log.wait(t, "the WebSocket watch's ResponseComplete", 1, func(ev auditv1.Event) bool {
			return ev.AuditID == started.AuditID && ev.Stage == auditv1.StageResponseComplete
		})[0]
		for _, ev := range []auditv1.Event{started, done} {
			if ev.User.Username != adminUser || ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusSwitchingProtocols ||
				ev.ObjectRef == nil || ev.ObjectRef.Namespace != "default" || ev.ObjectRef.Resource != "widgets" {
				t.Errorf("%s: %+v", ev.Stage, ev)
			}
		}
	})

	t.Run("a refused token", func(t *testing.T) {
		code, _, err := s.Do("GET", wsWidgetsPath+"?audit=refused", "not-the-token", nil)
		if err != nil || code != http.StatusUnauthorized {
			t.Fatalf("GET with a wrong token: %d %v", code, err)
		}
		ev := log.wait(t, "the refused request", 1, func(ev auditv1.Event) bool {
			return strings.HasSuffix(ev.RequestURI, "?audit=refused")
		})[0]
		if ev.Stage != auditv1.StageResponseStarted || ev.User.Username != "" || ev.Level != auditv1.LevelRequestResponse ||
			ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusUnauthorized ||
			ev.ResponseStatus.Message != "Authentication failed, attempted: bearer" {
			t.Errorf("refused request: %+v", ev)
		}
	})

	t.Run("impersonation", func(t *testing.T) {
		out, errOut, err := s.Kubectl("get", "widgets", "--as", "alice", "--as-group", "system:masters", "-o", "name")
		if err != nil && strings.Contains(errOut, "impersonation is not supported") {
			t.Skip("the server does not impersonate yet")
		}
		if err != nil {
			t.Fatalf("kubectl --as: %v\n%s%s", err, out, errOut)
		}
		ev := log.wait(t, "the impersonated list", 1, func(ev auditv1.Event) bool {
			return ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == "alice" && ev.Stage == auditv1.StageResponseComplete
		})[0]
		if ev.User.Username != adminUser || !slices.Contains(ev.ImpersonatedUser.Groups, "system:masters") || ev.Verb != "list" {
			t.Errorf("impersonated list: user %q impersonated %+v verb %q", ev.User.Username, ev.ImpersonatedUser, ev.Verb)
		}
	})

	t.Run("rotation", func(t *testing.T) {
		// Widgets with a 200 KB annotation, recorded with their bodies,
		// fill more than the 1 MB --audit-log-maxsize.
		big := strings.Repeat("x", 200<<10)
		for i := range 3 {
			if out, errOut, err := s.KubectlInput(auditWidget(fmt.Sprintf("big%d", i), big), "create", "-f", "-"); err != nil {
				t.Fatalf("kubectl create: %v\n%s%.500s", err, out, errOut)
			}
		}
		log.wait(t, "the big widgets' creates", 3, func(ev auditv1.Event) bool {
			return ev.Verb == "create" && ev.User.Username == adminUser && ev.Stage == auditv1.StageResponseComplete &&
				ev.ObjectRef != nil && strings.HasPrefix(ev.ObjectRef.Name, "big")
		})
		files := log.files(t)
		if len(files) < 2 {
			t.Fatalf("no rotated audit log beside %s", log.path)
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > 1<<20 || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %d bytes, mode %v; want at most 1 MiB, 0600", f, fi.Size(), fi.Mode().Perm())
			}
		}
	})

	t.Run("the drops metric is served", func(t *testing.T) {
		_, body, err := s.Do("GET", "/metrics", s.Token, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"setpoint_audit_events_dropped_total 0\n", "setpoint_audit_events_total "} {
			if !strings.Contains(string(body), m) {
				t.Errorf("/metrics lacks %q", m)
			}
		}
	})
}

// auditWidget is a Widget manifest, with an annotation when note is set.
func auditWidget(name, note string) string {
	ann := ""
	if note != "" {
		ann = fmt.Sprintf("\n  annotations:\n    note: %q", note)
	}
	return fmt.Sprintf(`apiVersion: example.setpoint.dev/v1
kind: Widget
metadata:
  name: %s
  namespace: default%s
spec:
  name: %s
  size: small
`, name, ann, name)
}
