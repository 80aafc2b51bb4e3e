package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchersShareDecodedObjects checks that watches of one resource get
// the same decoded object for a store event, with the event's
// resourceVersion, and that a selector still filters per watch.
func TestWatchersShareDecodedObjects(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	w0 := mustCreate(t, s, widget("a", "small", map[string]string{"tier": "x"}))
	var ws []watch.Interface
	for _, sel := range []string{"", "", "tier=y"} {
		w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: w0.GetResourceVersion(), LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	out, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, widget("b", "small", map[string]string{"tier": "y"}))
	e0, e1 := <-ws[0].ResultChan(), <-ws[1].ResultChan()
	if e0.Type != watch.Modified || e1.Type != watch.Modified {
		t.Fatalf("events %s, %s; want MODIFIED", e0.Type, e1.Type)
	}
	if e0.Object != e1.Object {
		t.Error("the two watches decoded the same store event separately")
	}
	if rv := e0.Object.(*unstructured.Unstructured).GetResourceVersion(); rv != out.GetResourceVersion() {
		t.Errorf("resourceVersion %s, want %s", rv, out.GetResourceVersion())
	}
	e2 := <-ws[2].ResultChan()
	if e2.Type != watch.Added || e2.Object.(*unstructured.Unstructured).GetName() != "b" {
		t.Errorf("selector watch got %s %v, want ADDED b", e2.Type, e2.Object)
	}
}

// BenchmarkWatchFanOut measures one update delivered to N watches of the
// kind: per op, one write and N deliveries.
func BenchmarkWatchFanOut(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := newService(b)
			obj, err := s.Create(ctx, widgets, widget("a", "small", nil), metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{}, n)
			for range n {
				w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Stop()
				go func() {
					for range w.ResultChan() {
						done <- struct{}{}
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"i":"%d"}}}`, i)
				if _, err := s.Patch(ctx, widgets, "default", "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-done
				}
			}
		})
	}
}
