package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store/badger"
)

var widgets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}

// newService opens a Service on a real Badger store in a temp dir, with the
// Widget CRD of examples/widget registered.
func newService(t testing.TB) *Service {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(context.Background(), Options{Store: db})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	crd := kindstest.WidgetCRD(t)
	if _, err := s.Create(context.Background(), kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create widget CRD: %v", err)
	}
	return s
}

// openService opens a Service on the Badger store in dir, with only the
// kinds dir already holds. The store closes at the end of the test, or
// earlier by the caller (Close is idempotent) to restart on dir.
func openService(t testing.TB, dir string) (*Service, *badger.DB) {
	t.Helper()
	db, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(context.Background(), Options{Store: db})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

func widget(name, size string, labels map[string]string) *unstructured.Unstructured {
	return kindstest.Widget(name, size, labels)
}

func mustCreate(t *testing.T, s *Service, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Create(context.Background(), widgets, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	return out
}

func TestCreateValidation(t *testing.T) {
	s := newService(t)
	tests := []struct {
		name    string
		mutate  func(u *unstructured.Unstructured)
		opts    metav1.CreateOptions
		code    int32
		reason  metav1.StatusReason
		field   string
		message string
	}{
		{name: "bad enum", mutate: func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, "huge", "spec", "size") },
			code: 422, reason: metav1.StatusReasonInvalid, field: "spec.size"},
		{name: "missing required", mutate: func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "name") },
			code: 422, reason: metav1.StatusReasonInvalid, field: "spec.name"},
		{name: "wrong type", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "name")
		},
			code: 422, reason: metav1.StatusReasonInvalid, field: "spec.name"},
		{name: "CEL rule", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%070d", 0), "spec", "name")
		}, code: 422, reason: metav1.StatusReasonInvalid, field: "spec", message: "at most 63"},
		{name: "unknown field strict", mutate: func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, "x", "spec", "bogus") },
			opts: metav1.CreateOptions{FieldValidation: "Strict"}, code: 400, reason: metav1.StatusReasonBadRequest, message: `unknown field "spec.bogus"`},
		{name: "bad name", mutate: func(u *unstructured.Unstructured) { u.SetName("Not_A_Name") },
			code: 422, reason: metav1.StatusReasonInvalid, field: "metadata.name"},
		{name: "wrong kind", mutate: func(u *unstructured.Unstructured) { u.SetKind("Gadget") },
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "missing namespace", mutate: func(u *unstructured.Unstructured) { u.SetNamespace("nowhere") },
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "bad dryRun", opts: metav1.CreateOptions{DryRun: []string{"Some"}}, code: 422, reason: metav1.StatusReasonInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := widget("v", "small", nil)
			if tt.mutate != nil {
				tt.mutate(u)
			}
			_, err := s.Create(context.Background(), widgets, u, tt.opts)
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a StatusError", err)
			}
			st := se.Status()
			if st.Code != tt.code || st.Reason != tt.reason {
				t.Fatalf("status = %d %s (%s), want %d %s", st.Code, st.Reason, st.Message, tt.code, tt.reason)
			}
			if tt.field != "" {
				found := false
				for _, c := range st.Details.Causes {
					found = found || c.Field == tt.field
				}
				if !found {
					t.Errorf("causes %+v lack field %s", st.Details.Causes, tt.field)
				}
			}
			if tt.message != "" && !contains(st.Message, tt.message) {
				t.Errorf("message %q lacks %q", st.Message, tt.message)
			}
		})
	}
	// Every violation is reported, one cause per field.
	u := widget("v", "huge", nil)
	unstructured.RemoveNestedField(u.Object, "spec", "name")
	_, err := s.Create(context.Background(), widgets, u, metav1.CreateOptions{})
	if st := apierrors.APIStatus(nil); errors.As(err, &st) && len(st.Status().Details.Causes) < 2 {
		t.Errorf("causes = %+v, want one for spec.size and one for spec.name", st.Status().Details.Causes)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestCreateServerFields(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	u := widget("", "small", nil)
	u.SetGenerateName("gen-")
	u.SetUID("forged")
	u.SetResourceVersion("999")
	u.SetGeneration(42)
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(0, 0)))
	u.Object["status"] = map[string]any{"state": "Forged"}
	_ = unstructured.SetNestedField(u.Object, "dropped", "spec", "unknown")
	out := mustCreate(t, s, u)
	switch {
	case out.GetName() == "gen-" || len(out.GetName()) != len("gen-")+5:
		t.Errorf("generated name = %q", out.GetName())
	case out.GetUID() == "forged" || out.GetUID() == "":
		t.Errorf("uid = %q, want a server uid", out.GetUID())
	case out.GetGeneration() != 1:
		t.Errorf("generation = %d, want 1", out.GetGeneration())
	case out.GetCreationTimestamp().Unix() == 0:
		t.Errorf("creationTimestamp was forged")
	case out.Object["status"] != nil:
		t.Errorf("status = %v, want none on create", out.Object["status"])
	}
	if _, found, _ := unstructured.NestedString(out.Object, "spec", "unknown"); found {
		t.Error("unknown field was not pruned")
	}
	if c, _, _ := unstructured.NestedString(out.Object, "spec", "color"); c != "gray" {
		t.Errorf("spec.color = %q, want the default gray", c)
	}
	got, err := s.Get(ctx, widgets, "default", out.GetName(), metav1.GetOptions{})
	if err != nil || got.GetResourceVersion() != out.GetResourceVersion() || got.GetResourceVersion() == "999" {
		t.Fatalf("get = %v, %v", got, err)
	}
	// dryRun stores nothing.
	d := widget("dry", "small", nil)
	if _, err := s.Create(ctx, widgets, d, metav1.CreateOptions{DryRun: []string{"All"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, widgets, "default", "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run object was stored: %v", err)
	}
	if _, err := s.Create(ctx, widgets, widget(out.GetName(), "small", nil), metav1.CreateOptions{DryRun: []string{"All"}}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("dry-run create of an existing object = %v, want AlreadyExists", err)
	}
	if _, err := s.Create(ctx, widgets, widget(out.GetName(), "small", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create = %v, want AlreadyExists", err)
	}
}

func TestUpdateSemantics(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	w := mustCreate(t, s, widget("u", "small", nil))

	// A metadata-only change keeps the generation.
	w.SetLabels(map[string]string{"env": "dev"})
	w2, err := s.Update(ctx, widgets, w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w2.GetGeneration() != 1 || w2.GetResourceVersion() == w.GetResourceVersion() {
		t.Errorf("label update: generation %d rv %s", w2.GetGeneration(), w2.GetResourceVersion())
	}
	// A stale resourceVersion is a conflict.
	if _, err := s.Update(ctx, widgets, w, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update = %v, want Conflict", err)
	}
	// A spec change bumps it; status in an update is ignored.
	_ = unstructured.SetNestedField(w2.Object, "large", "spec", "size")
	w2.Object["status"] = map[string]any{"state": "Ignored"}
	w3, err := s.Update(ctx, widgets, w2, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w3.GetGeneration() != 2 || w3.Object["status"] != nil {
		t.Errorf("spec update: generation %d status %v", w3.GetGeneration(), w3.Object["status"])
	}
	// An unchanged update writes nothing.
	w4, err := s.Update(ctx, widgets, w3, metav1.UpdateOptions{})
	if err != nil || w4.GetResourceVersion() != w3.GetResourceVersion() {
		t.Errorf("no-op update: rv %s -> %s, %v", w3.GetResourceVersion(), w4.GetResourceVersion(), err)
	}
	// Status goes through /status, keeps the generation and ignores spec.
	w3.Object["status"] = map[string]any{"state": "Ready", "lastProvisioned": "2026-01-02T03:04:05Z"}
	_ = unstructured.SetNestedField(w3.Object, "small", "spec", "size")
	w5, err := s.UpdateStatus(ctx, widgets, w3, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := unstructured.NestedString(w5.Object, "status", "state"); st != "Ready" || w5.GetGeneration() != 2 {
		t.Errorf("status update: state %q generation %d", st, w5.GetGeneration())
	}
	if sz, _, _ := unstructured.NestedString(w5.Object, "spec", "size"); sz != "large" {
		t.Errorf("status update changed spec.size to %q", sz)
	}
	// Status is validated too.
	w5.Object["status"] = map[string]any{"lastProvisioned": "yesterday"}
	if _, err := s.UpdateStatus(ctx, widgets, w5, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("bad status = %v, want Invalid", err)
	}
	// A custom resource, its status and a CRD are not updated without a
	// resourceVersion (a client must have seen what it replaces); a
	// namespace may be, as in Kubernetes.
	blind := w5.DeepCopy()
	blind.SetResourceVersion("")
	blind.SetLabels(map[string]string{"blind": "yes"})
	if _, err := s.Update(ctx, widgets, blind, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "metadata.resourceVersion") || !strings.Contains(err.Error(), "must be specified for an update") {
		t.Errorf("update without resourceVersion = %v, want Invalid on metadata.resourceVersion", err)
	}
	if _, err := s.UpdateStatus(ctx, widgets, blind, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("status update without resourceVersion = %v, want Invalid", err)
	}
	crd, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.SetResourceVersion("")
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("CRD update without resourceVersion = %v, want Invalid", err)
	}
	ns, err := s.Get(ctx, kinds.NamespaceResource, "", "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.SetResourceVersion("")
	ns.SetLabels(map[string]string{"team": "a"})
	if out, err := s.Update(ctx, kinds.NamespaceResource, ns, metav1.UpdateOptions{}); err != nil || out.GetLabels()["team"] != "a" {
		t.Errorf("namespace update without resourceVersion = %v, %v; want it applied", out, err)
	}
}

func TestPatch(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("p", "small", nil))
	tests := []struct {
		name  string
		pt    types.PatchType
		data  string
		sub   []string
		check func(u *unstructured.Unstructured) string
		code  int32
		msg   string // in the error, when code is set
	}{
		{name: "merge", pt: types.MergePatchType, data: `{"metadata":{"labels":{"env":"prod"}},"spec":{"size":"medium"}}`,
			check: func(u *unstructured.Unstructured) string {
				if u.GetLabels()["env"] != "prod" || u.GetGeneration() != 2 {
					return fmt.Sprintf("labels %v generation %d", u.GetLabels(), u.GetGeneration())
				}
				return ""
			}},
		{name: "json", pt: types.JSONPatchType, data: `[{"op":"replace","path":"/spec/size","value":"large"}]`,
			check: func(u *unstructured.Unstructured) string {
				if sz, _, _ := unstructured.NestedString(u.Object, "spec", "size"); sz != "large" {
					return "size " + sz
				}
				return ""
			}},
		{name: "status merge", pt: types.MergePatchType, sub: []string{"status"}, data: `{"status":{"state":"Ready"}}`,
			check: func(u *unstructured.Unstructured) string {
				if st, _, _ := unstructured.NestedString(u.Object, "status", "state"); st != "Ready" {
					return "state " + st
				}
				return ""
			}},
		{name: "invalid result", pt: types.MergePatchType, data: `{"spec":{"size":"huge"}}`, code: 422},
		{name: "failed test op", pt: types.JSONPatchType, data: `[{"op":"test","path":"/spec/size","value":"tiny"}]`, code: 422,
			msg: `Widget.example.setpoint.dev "p" is invalid: patch: Invalid value: the JSON patch could not be applied: testing value /spec/size failed`},
		{name: "missing path", pt: types.JSONPatchType, data: `[{"op":"remove","path":"/spec/nothere"}]`, code: 422,
			msg: `error in remove for path: '/spec/nothere': Unable to remove nonexistent key: nothere`},
		{name: "strategic on a custom resource", pt: types.StrategicMergePatchType, data: `{}`, code: 415},
		{name: "stale resourceVersion", pt: types.MergePatchType, data: `{"metadata":{"resourceVersion":"1"}}`, code: 409},
		{name: "malformed", pt: types.MergePatchType, data: `{`, code: 400, msg: "error decoding patch: unexpected end of JSON input"},
		{name: "malformed key", pt: types.MergePatchType, data: `{bad json`, code: 400,
			msg: "error decoding patch: invalid character 'b' looking for beginning of object key string"},
		{name: "another namespace", pt: types.MergePatchType, data: `{"metadata":{"namespace":"other"}}`, code: 400,
			msg: "the namespace of the object (other) does not match the namespace on the request (default)"},
		{name: "another name", pt: types.JSONPatchType, data: `[{"op":"replace","path":"/metadata/name","value":"q"}]`, code: 400,
			msg: "the name of the object (q) does not match the name on the URL (p)"},
		{name: "copy bomb", pt: types.JSONPatchType, data: copyBomb(), code: 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := s.Patch(ctx, widgets, "default", "p", tt.pt, []byte(tt.data), metav1.PatchOptions{}, tt.sub...)
			if tt.code != 0 {
				if st := apierrors.APIStatus(nil); !errors.As(err, &st) || st.Status().Code != tt.code {
					t.Fatalf("err = %v, want code %d", err, tt.code)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err = %v, want it to say %q", err, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(u); msg != "" {
				t.Error(msg)
			}
		})
	}
	// Namespaces take strategic merge patches.
	if _, err := s.Patch(ctx, kinds.NamespaceResource, "", "default", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("strategic patch of a namespace: %v", err)
	}
}

func TestListSelectorsAndPages(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	for i := 0; i < 10; i++ {
		env := []string{"dev", "prod", "test"}[i%3]
		mustCreate(t, s, widget(fmt.Sprintf("w%02d", i), "small", map[string]string{"env": env}))
	}
	tests := []struct {
		name, labels, fields string
		want                 int
		code                 int32
	}{
		{name: "all", want: 10},
		{name: "equality", labels: "env=dev", want: 4},
		{name: "set", labels: "env in (dev,prod)", want: 7},
		{name: "notin", labels: "env notin (dev,prod)", want: 3},
		{name: "not equal", labels: "env!=dev", want: 6},
		{name: "exists", labels: "env", want: 10},
		{name: "not exists", labels: "!env", want: 0},
		{name: "name field", fields: "metadata.name=w03", want: 1},
		{name: "namespace field", fields: "metadata.namespace=default,metadata.name!=w03", want: 9},
		{name: "bad label selector", labels: "env in (", code: 400},
		{name: "unsupported field", fields: "spec.size=small", code: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := s.List(ctx, widgets, "default", metav1.ListOptions{LabelSelector: tt.labels, FieldSelector: tt.fields})
			if tt.code != 0 {
				if st := apierrors.APIStatus(nil); !errors.As(err, &st) || st.Status().Code != tt.code {
					t.Fatalf("err = %v, want code %d", err, tt.code)
				}
				return
			}
			if err != nil || len(l.Items) != tt.want {
				t.Fatalf("got %d items, %v; want %d", len(l.Items), err, tt.want)
			}
		})
	}
	// Pages at one revision, while writes go on.
	var names []string
	opts := metav1.ListOptions{Limit: 3}
	rev := ""
	for page := 0; page < 10; page++ {
		l, err := s.List(ctx, widgets, "", opts)
		if err != nil {
			t.Fatal(err)
		}
		if rev == "" {
			rev = l.GetResourceVersion()
		} else if l.GetResourceVersion() != rev {
			t.Fatalf("page %d at rv %s, first at %s", page, l.GetResourceVersion(), rev)
		}
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
		mustCreate(t, s, widget(fmt.Sprintf("late%d", page), "small", nil))
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	if len(names) != 10 {
		t.Errorf("paged list saw %d objects, want 10: %v", len(names), names)
	}
	// Exact resourceVersion reads the past.
	l, err := s.List(ctx, widgets, "", metav1.ListOptions{ResourceVersion: rev, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil || len(l.Items) != 10 {
		t.Fatalf("exact list = %d, %v", len(l.Items), err)
	}
	if _, err := s.List(ctx, widgets, "", metav1.ListOptions{ResourceVersion: "99999999", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); !apierrors.IsTimeout(err) {
		t.Errorf("future list = %v, want Timeout", err)
	}
	if _, err := s.Get(ctx, widgets, "default", "w00", metav1.GetOptions{ResourceVersion: rev}); err != nil {
		t.Errorf("get at rv: %v", err)
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event in 5s")
	}
	return watch.Event{}
}

func TestWatch(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("before", "small", map[string]string{"env": "dev"}))
	w, err := s.Watch(ctx, widgets, "", metav1.ListOptions{LabelSelector: "env=dev"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type step struct {
		do   func()
		want watch.EventType
		name string
	}
	steps := []step{
		{do: func() {}, want: watch.Added, name: "before"},
		{do: func() { mustCreate(t, s, widget("a", "small", map[string]string{"env": "dev"})) }, want: watch.Added, name: "a"},
		{do: func() {
			mustCreate(t, s, widget("other", "small", map[string]string{"env": "prod"}))
			_, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}, want: watch.Modified, name: "a"},
		{do: func() {
			_, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"env":"prod"}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}, want: watch.Deleted, name: "a"},
		{do: func() {
			if err := s.Delete(ctx, widgets, "default", "before", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: watch.Deleted, name: "before"},
	}
	for i, st := range steps {
		st.do()
		ev := nextEvent(t, w)
		u, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != st.want || u == nil || u.GetName() != st.name {
			t.Fatalf("step %d: event %s %v, want %s %s", i, ev.Type, ev.Object, st.want, st.name)
		}
	}
	// From a compacted revision: 410.
	rev, _ := s.store.CurrentRevision(ctx)
	if err := s.store.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	_, err = s.Watch(ctx, widgets, "", metav1.ListOptions{ResourceVersion: "2"})
	if st := apierrors.APIStatus(nil); !errors.As(err, &st) || st.Status().Code != 410 {
		t.Errorf("watch from a compacted revision = %v, want 410", err)
	}
	// Bookmarks and the initial-events marker.
	yes := true
	w2, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for i := 0; i < 3; i++ { // "a" and "other" are left
		ev := nextEvent(t, w2)
		if i < 2 && ev.Type != watch.Added {
			t.Fatalf("initial event %d = %s", i, ev.Type)
		}
		if i == 2 {
			u := ev.Object.(*unstructured.Unstructured)
			if ev.Type != watch.Bookmark || u.GetAnnotations()[InitialEventsEndAnnotation] != "true" {
				t.Fatalf("event = %s %v, want the initial-events-end bookmark", ev.Type, u)
			}
		}
	}
}

func TestRestartKeepsKinds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openService(t, dir)
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, widget("kept", "small", nil))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, db = openService(t, dir)
	if _, err := s.Get(ctx, widgets, "default", "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

// copyBomb is a JSON patch whose copies double the object again and again.
func copyBomb() string {
	ops := `[{"op":"add","path":"/metadata/annotations","value":{"a":"` + strings.Repeat("x", 1024) + `"}}`
	for i := 0; i < 40; i++ {
		ops += fmt.Sprintf(`,{"op":"copy","from":"/metadata/annotations","path":"/spec/c%d"}`, i)
		ops += fmt.Sprintf(`,{"op":"copy","from":"/spec","path":"/metadata/annotations/b%d"}`, i)
	}
	return ops + "]"
}

func TestListJSONMatchesList(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	for i := range 5 {
		mustCreate(t, s, widget(fmt.Sprintf("w%d", i), "small", map[string]string{"n": fmt.Sprint(i % 2)}))
	}
	for _, tc := range []struct {
		name string
		opts metav1.ListOptions
	}{
		{"all", metav1.ListOptions{}},
		{"label selector", metav1.ListOptions{LabelSelector: "n=1"}},
		{"page", metav1.ListOptions{Limit: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := s.List(ctx, widgets, "default", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			j, err := s.ListJSON(ctx, widgets, "default", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if j.APIVersion != l.GetAPIVersion() || j.Kind != l.GetKind() || j.ResourceVersion != l.GetResourceVersion() || j.Continue != l.GetContinue() {
				t.Errorf("header %+v, want %s %s %s %q", j, l.GetAPIVersion(), l.GetKind(), l.GetResourceVersion(), l.GetContinue())
			}
			if len(j.Items) != len(l.Items) {
				t.Fatalf("%d items, want %d", len(j.Items), len(l.Items))
			}
			for i := range l.Items {
				var got map[string]any
				if err := json.Unmarshal(j.Items[i], &got); err != nil {
					t.Fatalf("item %d: %v: %s", i, err, j.Items[i])
				}
				want, _ := l.Items[i].MarshalJSON()
				var wantM map[string]any
				_ = json.Unmarshal(want, &wantM)
				if diff := cmp.Diff(wantM, got); diff != "" {
					t.Errorf("item %d (-List +ListJSON):\n%s", i, diff)
				}
			}
		})
	}
}
