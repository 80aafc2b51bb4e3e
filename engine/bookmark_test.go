package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestBookmarksFollowTheStore checks that a watch of a quiet namespace gets
// bookmarks that move with the store, not with its own last event, so that
// resuming from the last bookmark still works once the revision it started
// from is compacted.
func TestBookmarksFollowTheStore(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(ctx, Options{Store: db, BookmarkInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, s, widget("a", "small", nil))
	w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: a.GetResourceVersion(), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The store moves on in another namespace.
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "other"}}}
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var cur int64
	for i := range 20 {
		o := widget("b"+strconv.Itoa(i), "small", nil)
		o.SetNamespace("other")
		out, err := s.Create(ctx, widgets, o, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur = revisionOf(out)
	}
	// A change in the watched namespace must come before any bookmark past it.
	b := mustCreate(t, s, widget("b", "small", nil))
	for i := range 5 {
		o := widget("c"+strconv.Itoa(i), "small", nil)
		o.SetNamespace("other")
		out, err := s.Create(ctx, widgets, o, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur = revisionOf(out)
	}

	var last int64
	sawB := false
	deadline := time.After(10 * time.Second)
	for last < cur {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			rv, _ := strconv.ParseInt(ev.Object.(*unstructured.Unstructured).GetResourceVersion(), 10, 64)
			switch ev.Type {
			case watch.Bookmark:
				if rv < last {
					t.Fatalf("bookmark %d after %d", rv, last)
				}
				if rv >= revisionOf(b) && !sawB {
					t.Fatalf("bookmark %d before the event of b at %d", rv, revisionOf(b))
				}
				last = rv
			case watch.Added:
				if ev.Object.(*unstructured.Unstructured).GetName() != "b" {
					t.Fatalf("unexpected %s", ev.Object.(*unstructured.Unstructured).GetName())
				}
				sawB = true
			default:
				t.Fatalf("unexpected %s event", ev.Type)
			}
		case <-deadline:
			t.Fatalf("last bookmark at %d, the store at %d", last, cur)
		}
	}

	if err := db.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	resumed, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: strconv.FormatInt(last, 10)})
	if err != nil {
		t.Fatalf("resume from the last bookmark %d after compacting to %d: %v", last, cur, err)
	}
	resumed.Stop()
}

func TestNextBookmark(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		deadline time.Time
		interval time.Duration
		want     time.Duration
	}{
		{name: "no deadline", interval: 15 * time.Second, want: 15 * time.Second},
		{name: "deadline far", deadline: now.Add(time.Hour), interval: 15 * time.Second, want: 15 * time.Second},
		{name: "before the deadline", deadline: now.Add(5 * time.Second), interval: 15 * time.Second, want: 3 * time.Second},
		{name: "deadline within the lead", deadline: now.Add(time.Second), interval: 250 * time.Millisecond, want: 250 * time.Millisecond},
		{name: "interval sooner", deadline: now.Add(5 * time.Second), interval: time.Second, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextBookmark(now, tt.deadline, tt.interval); got != tt.want {
				t.Errorf("nextBookmark = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBookmarkBeforeTimeout checks that a watch with timeoutSeconds gets a
// bookmark bookmarkLead before it ends, long before the periodic one is
// due, carrying the store's revision.
func TestBookmarkBeforeTimeout(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(ctx, Options{Store: db}) // the default interval, 15s
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, s, widget("a", "small", nil))
	timeout := int64(3)
	start := time.Now()
	w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: a.GetResourceVersion(), AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type != watch.Bookmark {
			t.Fatalf("got %v (open %v), want a bookmark", ev.Type, ok)
		}
		if rv := revisionOf(ev.Object.(*unstructured.Unstructured)); rv < revisionOf(a) {
			t.Errorf("bookmark at %d, behind the store's %d", rv, revisionOf(a))
		}
		if d := time.Since(start); d > time.Duration(timeout)*time.Second {
			t.Errorf("bookmark after %v, past the timeout", d)
		}
	case <-time.After(time.Duration(timeout) * time.Second):
		t.Fatal("no bookmark before the watch's timeout")
	}
}
