package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestConcurrentWritesOneObject hammers one object from several goroutines:
// patches retry on conflict, updates with a stale resourceVersion lose, and
// no write is lost.
func TestConcurrentWritesOneObject(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("h", "small", nil))
	const workers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"w%d-%d":"x"}}}`, w, i)
				if _, err := s.Patch(ctx, widgets, "default", "h", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("patch: %v", err)
	}
	got, err := s.Get(ctx, widgets, "default", "h", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetAnnotations()); n != workers*each {
		t.Fatalf("%d annotations, want %d: a write was lost", n, workers*each)
	}
	// Read-modify-write updates: exactly one of two racing updates from the
	// same read wins.
	a, b := got.DeepCopy(), got.DeepCopy()
	_ = unstructured.SetNestedField(a.Object, "medium", "spec", "size")
	_ = unstructured.SetNestedField(b.Object, "large", "spec", "size")
	var wins int
	var mu sync.Mutex
	var wg2 sync.WaitGroup
	for _, u := range []*unstructured.Unstructured{a, b} {
		wg2.Add(1)
		go func(u *unstructured.Unstructured) {
			defer wg2.Done()
			if _, err := s.Update(ctx, widgets, u, metav1.UpdateOptions{}); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}(u)
	}
	wg2.Wait()
	if wins != 1 {
		t.Fatalf("%d of two racing updates won, want exactly 1", wins)
	}
}
