package plugins

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
