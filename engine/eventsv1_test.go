package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// TestEventsV1 writes Events through core/v1 and events.k8s.io/v1 and
// reads, lists, watches, patches and deletes them through both, with
// kube's field mapping between the two.
func TestEventsV1(t *testing.T) {
	s, _ := openService(t, t.TempDir())
	ctx := context.Background()
	core, v1 := kinds.EventResource, kinds.EventsV1Resource

	wCore, err := s.Watch(ctx, core, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wCore.Stop()
	wV1, err := s.Watch(ctx, v1, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wV1.Stop()

	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"name": "old", "namespace": "default"},
		"involvedObject": map[string]any{"kind": "Pod", "name": "p", "namespace": "default"},
		"reason":         "Started", "message": "started it", "type": "Normal", "count": int64(3),
		"source":         map[string]any{"component": "kubelet", "host": "n1"},
		"firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:06Z",
	}}
	if _, err := s.Create(ctx, core, old, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create core/v1: %v", err)
	}
	got, err := s.Get(ctx, v1, "default", "old", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get events.k8s.io/v1: %v", err)
	}
	for path, want := range map[string]any{
		"apiVersion": "events.k8s.io/v1", "regarding.name": "p", "note": "started it", "deprecatedCount": int64(3),
		"deprecatedSource.component": "kubelet", "deprecatedSource.host": "n1",
		"deprecatedFirstTimestamp": "2026-01-02T03:04:05Z", "deprecatedLastTimestamp": "2026-01-02T03:04:06Z",
		"reason": "Started", "type": "Normal",
	} {
		v, _, _ := unstructured.NestedFieldNoCopy(got.Object, strings.Split(path, ".")...)
		if v != want {
			t.Errorf("events.k8s.io/v1 %s = %v, want %v", path, v, want)
		}
	}
	for _, f := range []string{"involvedObject", "message", "source", "count", "firstTimestamp"} {
		if _, ok := got.Object[f]; ok {
			t.Errorf("events.k8s.io/v1 Event has core/v1 field %s", f)
		}
	}

	ev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata":  map[string]any{"name": "new", "namespace": "default"},
		"regarding": map[string]any{"kind": "Pod", "name": "q", "namespace": "default"},
		"eventTime": "2026-01-02T03:04:05.000001Z", "reportingController": "example.com/ctl",
		"reportingInstance": "ctl-1", "action": "Scale", "reason": "Scaled", "note": "scaled it", "type": "Warning",
		"series": map[string]any{"count": int64(2), "lastObservedTime": "2026-01-02T03:04:07.000002Z"},
	}}
	created, err := s.Create(ctx, v1, ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create events.k8s.io/v1: %v", err)
	}
	if created.GetAPIVersion() != "events.k8s.io/v1" || created.Object["note"] != "scaled it" || created.Object["message"] != nil {
		t.Errorf("created through events.k8s.io/v1: %v", created.Object)
	}
	got, err = s.Get(ctx, core, "default", "new", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get core/v1: %v", err)
	}
	for path, want := range map[string]any{
		"apiVersion": "v1", "involvedObject.name": "q", "message": "scaled it", "reportingComponent": "example.com/ctl",
		"reportingInstance": "ctl-1", "action": "Scale", "series.count": int64(2), "eventTime": "2026-01-02T03:04:05.000001Z",
	} {
		v, _, _ := unstructured.NestedFieldNoCopy(got.Object, strings.Split(path, ".")...)
		if v != want {
			t.Errorf("core/v1 %s = %v, want %v", path, v, want)
		}
	}

	for _, w := range []struct {
		name string
		w    watch.Interface
		av   string
	}{{"core/v1", wCore, "v1"}, {"events.k8s.io/v1", wV1, "events.k8s.io/v1"}} {
		for _, name := range []string{"old", "new"} {
			select {
			case e := <-w.w.ResultChan():
				u := e.Object.(*unstructured.Unstructured)
				if e.Type != watch.Added || u.GetName() != name || u.GetAPIVersion() != w.av {
					t.Errorf("%s watch: %s %s %s, want ADDED %s %s", w.name, e.Type, u.GetAPIVersion(), u.GetName(), w.av, name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s watch: no event for %s", w.name, name)
			}
		}
	}

	list, err := s.List(ctx, v1, "", metav1.ListOptions{FieldSelector: "metadata.name=old"})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetAPIVersion() != "events.k8s.io/v1" {
		t.Fatalf("list events.k8s.io/v1 by name: %v %v", list, err)
	}
	// events.k8s.io/v1's field labels select on its fields, list and
	// watch alike; core/v1's are refused.
	list, err = s.List(ctx, v1, "", metav1.ListOptions{FieldSelector: "regarding.name=p,reason=Started"})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "old" {
		t.Errorf("list events.k8s.io/v1 by regarding.name: %v %v", list, err)
	}
	if _, err := s.List(ctx, v1, "", metav1.ListOptions{FieldSelector: "involvedObject.name=p"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list events.k8s.io/v1 by involvedObject.name: %v, want BadRequest", err)
	}
	wSel, err := s.Watch(ctx, v1, "default", metav1.ListOptions{FieldSelector: "reportingController=example.com/ctl"})
	if err != nil {
		t.Fatal(err)
	}
	defer wSel.Stop()
	select {
	case e := <-wSel.ResultChan():
		if u := e.Object.(*unstructured.Unstructured); e.Type != watch.Added || u.GetName() != "new" {
			t.Errorf("selected watch: %s %s, want ADDED new", e.Type, u.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("selected watch: no event")
	}

	// A patch through events.k8s.io/v1 that changes the note is refused;
	// the series may change; core/v1 changes anything.
	if _, err := s.Patch(ctx, v1, "default", "new", types.MergePatchType, []byte(`{"note":"other"}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("patch note through events.k8s.io/v1: %v, want Invalid", err)
	}
	if _, err := s.Patch(ctx, v1, "default", "new", types.MergePatchType, []byte(`{"series":{"count":3}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patch series through events.k8s.io/v1: %v", err)
	}
	if _, err := s.Patch(ctx, core, "default", "new", types.MergePatchType, []byte(`{"message":"other"}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patch message through core/v1: %v", err)
	}
	got, err = s.Get(ctx, v1, "default", "new", metav1.GetOptions{})
	if err != nil || got.Object["note"] != "other" || got.Object["series"].(map[string]any)["count"] != int64(3) {
		t.Errorf("events.k8s.io/v1 after patches: %v %v", got, err)
	}

	if err := s.Delete(ctx, v1, "default", "old", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete events.k8s.io/v1: %v", err)
	}
	if _, err := s.Get(ctx, core, "default", "old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("core/v1 get after delete: %v, want NotFound", err)
	}
}

// TestEventsV1Validation refuses, through events.k8s.io/v1 only, Events
// kube-apiserver refuses there: without eventTime and the reporting
// fields, with a bad type or series, or with deprecated fields set.
func TestEventsV1Validation(t *testing.T) {
	s, _ := openService(t, t.TempDir())
	ctx := context.Background()
	mk := func(name string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "events.k8s.io/v1", "kind": "Event",
			"metadata":  map[string]any{"name": name, "namespace": "default"},
			"regarding": map[string]any{"kind": "Pod", "name": "q", "namespace": "default"},
		}}
		for k, v := range fields {
			u.Object[k] = v
		}
		return u
	}
	_, err := s.Create(ctx, kinds.EventsV1Resource, mk("bare", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("bare events.k8s.io/v1 Event: %v, want Invalid", err)
	}
	for _, want := range []string{"eventTime: Required value", "type: Invalid value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("bare Event: %v, want %q", err, want)
		}
	}
	good := map[string]any{"eventTime": "2026-01-02T03:04:05.000001Z", "reportingController": "example.com/ctl",
		"reportingInstance": "ctl-1", "action": "Scale", "reason": "Scaled", "type": "Normal"}
	for name, c := range map[string]struct {
		set  map[string]any
		want string
	}{
		// kube-apiserver names the field as the request's API does.
		"no-controller":  {map[string]any{"reportingController": ""}, "reportingController: Required value"},
		"bad-controller": {map[string]any{"reportingController": "a b"}, `reportingController: Invalid value: "a b": name part must consist of`},
		"no-action":      {map[string]any{"action": ""}, "action: Required value"},
		"bad-type":       {map[string]any{"type": "Odd"}, "type: Invalid value"},
		"series":         {map[string]any{"series": map[string]any{"count": int64(1)}}, "series.count: Invalid value"},
		"count":          {map[string]any{"deprecatedCount": int64(2)}, "count: Invalid value"},
		"source":         {map[string]any{"deprecatedSource": map[string]any{"host": "n"}}, "source: Invalid value"},
		"first":          {map[string]any{"deprecatedFirstTimestamp": "2026-01-02T03:04:05Z"}, "firstTimestamp: Invalid value"},
	} {
		f := map[string]any{}
		for k, v := range good {
			f[k] = v
		}
		for k, v := range c.set {
			f[k] = v
		}
		_, err := s.Create(ctx, kinds.EventsV1Resource, mk(name, f), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want Invalid with %q", name, err, c.want)
		}
	}
	if _, err := s.Create(ctx, kinds.EventsV1Resource, mk("good", good), metav1.CreateOptions{}); err != nil {
		t.Errorf("valid events.k8s.io/v1 Event: %v", err)
	}
	// The same Event without eventTime is a valid core/v1 Event.
	if _, err := s.Create(ctx, kinds.EventResource, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "legacy", "namespace": "default"},
		"involvedObject": map[string]any{"kind": "Pod", "name": "q", "namespace": "default"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("core/v1 Event without eventTime: %v", err)
	}
}
