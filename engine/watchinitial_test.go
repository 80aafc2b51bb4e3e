package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestWatchesShareInitialList checks that watches that start with no write
// in between get the very same decoded initial objects, that a watch after
// a write gets a fresh list with the write in it, that watches with other
// selectors do not share, that a watch from resourceVersion 0 takes any
// list still held, and that the shared lists go once their watches are done
// with them.
func TestWatchesShareInitialList(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("a", "small", map[string]string{"tier": "x"}))
	mustCreate(t, s, widget("b", "large", nil))

	first := func(opts metav1.ListOptions) (*unstructured.Unstructured, watch.Interface) {
		t.Helper()
		w, err := s.Watch(ctx, widgets, "default", opts)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("first event %s, want ADDED", ev.Type)
			}
			return ev.Object.(*unstructured.Unstructured), w
		case <-time.After(5 * time.Second):
			t.Fatal("no initial event in 5s")
		}
		return nil, nil
	}
	o1, w1 := first(metav1.ListOptions{})
	o2, w2 := first(metav1.ListOptions{})
	if o1 != o2 {
		t.Errorf("two watches started with no write in between decoded the initial list twice")
	}
	o3, w3 := first(metav1.ListOptions{LabelSelector: "tier=x"})
	if o3 == o1 {
		t.Errorf("a watch with a label selector shared the list of one without")
	}
	mustCreate(t, s, widget("c", "medium", nil))
	o4, w4 := first(metav1.ListOptions{})
	if o4 == o1 {
		t.Errorf("a watch started after a write shared the list read before it")
	}
	// From resourceVersion 0 ("any"), a list other watches hold will do,
	// even one older than the store: the newest of them, here w4's.
	mustCreate(t, s, widget("d", "small", nil))
	o5, w5 := first(metav1.ListOptions{ResourceVersion: "0"})
	if o5 != o4 {
		t.Errorf("a watch from resourceVersion 0 did not share a list other watches hold")
	}
	names := map[string]bool{o5.GetName(): true}
	for len(names) < 4 {
		select {
		case ev := <-w5.ResultChan():
			names[ev.Object.(*unstructured.Unstructured).GetName()] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("the watch from resourceVersion 0 saw only %v, want a, b, c and d", names)
		}
	}
	// A shared list older than the history kept is not used: the watch
	// reads a new one rather than fail with 410.
	mustCreate(t, s, widget("e", "small", nil))
	cur, err := s.store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	o6, w6 := first(metav1.ListOptions{ResourceVersion: "0"})
	if o6 == o4 {
		t.Errorf("a watch from resourceVersion 0 shared a list older than the compacted history")
	}
	for _, w := range []watch.Interface{w1, w2, w3, w4, w5, w6} {
		w.Stop()
	}
	// Once no watch holds them, the lists and their entries go.
	testsupport.Poll(t, 5*time.Second, "the shared initial lists to go once every watch stopped", func() (bool, string) {
		runtime.GC()
		s.initial.mu.Lock()
		n := len(s.initial.m)
		s.initial.mu.Unlock()
		return n == 0, fmt.Sprintf("%d shared initial lists still kept", n)
	})
}
