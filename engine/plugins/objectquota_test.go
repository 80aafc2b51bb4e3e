package plugins

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func TestObjectQuotaCountsAndRecounts(t *testing.T) {
	stored, counts := 0, 0
	q := newObjectQuota(3, func(context.Context, string) (int, error) { counts++; return stored, nil })
	now := time.Unix(0, 0)
	q.now = func() time.Time { return now }
	gr := schema.GroupResource{Group: "example.setpoint.dev", Resource: "notes"}
	create := func() error {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		err := q.admit(context.Background(), "p", sourceHostCall, gr, u)
		if err == nil {
			stored++
			if u.GetLabels()[CreatedByLabel] != "p" {
				t.Errorf("labels %v, want %s=p", u.GetLabels(), CreatedByLabel)
			}
		}
		return err
	}
	for i := range 3 {
		if err := create(); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	err := create()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "object quota of 3") {
		t.Fatalf("create past the quota: %v, want Forbidden naming the quota", err)
	}
	stored = 1 // two deleted
	if err := create(); err == nil {
		t.Fatal("a create before the recount was let through")
	}
	now = now.Add(DefaultQuotaRecount)
	if err := create(); err != nil {
		t.Fatalf("create after the recount: %v", err)
	}
	if counts != 2 {
		t.Errorf("%d counts in the store, want 2 (at the start and at the quota)", counts)
	}
}

// Concurrent creates share one count in the store and let through no more
// than the quota.
func TestObjectQuotaConcurrentCreates(t *testing.T) {
	var counts atomic.Int32
	q := newObjectQuota(10, func(context.Context, string) (int, error) {
		counts.Add(1)
		time.Sleep(50 * time.Millisecond)
		return 0, nil
	})
	gr := schema.GroupResource{Resource: "notes"}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if q.admit(context.Background(), "p", sourceChildren, gr, &unstructured.Unstructured{Object: map[string]any{}}) == nil {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 10 || counts.Load() != 1 {
		t.Errorf("%d creates allowed with %d counts in the store, want 10 with 1", allowed.Load(), counts.Load())
	}
}

// TestCountCreatedNarrowed: a plugin's objects are counted among the kinds
// its stored spec lets it create (permissions.write, where "events" is the
// emit permission and not the Event kind, and reconcile.owns), each once
// whatever number of versions it serves; "*" and a Plugin that is gone
// count every kind.
func TestCountCreatedNarrowed(t *testing.T) {
	ctx := context.Background()
	svc := newWriteService(t) // serves notes.example.setpoint.dev
	createCRDs(t, svc, testsupport.CRD{Kind: "Gadget", Versions: []testsupport.Version{{Name: "v1", Storage: true}, {Name: "v2"}}})
	if err := EnsureKind(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitServed(t, svc)
	digest := "sha256:" + strings.Repeat("ab", 32)
	for name, spec := range map[string]map[string]any{
		"writer":     {"permissions": map[string]any{"write": []any{"gadgets.example.setpoint.dev", "events"}}},
		"reconciler": {"reconcile": map[string]any{"for": "notes.example.setpoint.dev", "owns": []any{"configmaps", "events"}}},
		"everything": {"permissions": map[string]any{"write": []any{"*"}}},
	} {
		spec["module"] = map[string]any{"digest": digest}
		p := &unstructured.Unstructured{Object: map[string]any{"apiVersion": Resource.GroupVersion().String(), "kind": Kind,
			"metadata": map[string]any{"name": name}, "spec": spec}}
		if _, err := svc.Create(ctx, Resource, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Plugin %s: %v", name, err)
		}
	}
	gadgets := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v2", Resource: "gadgets"}
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	// Every plugin has one object of each kind labelled as its own, and
	// writer two more gadgets.
	i := 0
	create := func(gvr schema.GroupVersionResource, kind, plugin string) {
		i++
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("o%d", i), "namespace": "default", "labels": map[string]any{CreatedByLabel: plugin}}}}
		if _, err := svc.Create(ctx, gvr, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s of %s: %v", kind, plugin, err)
		}
	}
	for _, plugin := range []string{"writer", "reconciler", "everything", "gone"} {
		create(gadgets, "Gadget", plugin)
		create(notes, "Note", plugin)
		create(kinds.ConfigMapResource, "ConfigMap", plugin)
		create(kinds.EventResource, "Event", plugin)
	}
	create(gadgets, "Gadget", "writer")
	create(gadgets, "Gadget", "writer")
	for plugin, want := range map[string]int{"writer": 3, "reconciler": 2, "everything": 4, "gone": 4} {
		got, err := countCreated(ctx, svc, plugin)
		if err != nil || got != want {
			t.Errorf("countCreated(%s) = %d, %v; want %d", plugin, got, err, want)
		}
	}
}
