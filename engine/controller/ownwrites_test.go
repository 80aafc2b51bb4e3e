package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestOwnWrites(t *testing.T) {
	k := Key{"default", "w"}
	tests := []struct {
		name      string
		wrote     []string
		cached    string
		wantStale bool
		wantLen   int // after the stale check
	}{
		{"nothing written", nil, "5", false, 0},
		{"cache behind", []string{"7"}, "5", true, 1},
		{"cache caught up", []string{"7"}, "7", false, 0},
		{"cache ahead", []string{"7"}, "9", false, 0},
		{"older write kept out", []string{"7", "6"}, "6", true, 1},
		{"numeric, not lexical", []string{"10"}, "9", true, 1},
		{"opaque, different", []string{"x"}, "y", true, 1},
		{"opaque, same", []string{"x"}, "x", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newOwnWrites()
			for _, rv := range tt.wrote {
				w.wrote(k, rv)
			}
			if got := w.stale(k, tt.cached); got != tt.wantStale {
				t.Errorf("stale = %v, want %v", got, tt.wantStale)
			}
			if got := w.len(); got != tt.wantLen {
				t.Errorf("len = %d, want %d", got, tt.wantLen)
			}
			w.forget(k)
			if w.len() != 0 {
				t.Error("forget kept the key")
			}
		})
	}
}

// TestOwnWritesCopyTakenBeforeCatchUp: the cache catches up with the
// controller's write, and its handler forgets the write, just after a
// reconcile took its copy of the object from the cache. That copy still
// predates the write: a reconcile that compared its status with it would
// skip a write the store needs, and a status-only event reconciles nothing
// after it.
func TestOwnWritesCopyTakenBeforeCatchUp(t *testing.T) {
	k := Key{"default", "w"}
	at := func(rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetResourceVersion(rv)
		return u
	}
	tests := []struct {
		name      string
		wrote     string // "": nothing written
		cached    string // the copy get returns
		catchUp   bool   // the cache's handler sees the write during get
		wantStale bool
	}{
		{"nothing written", "", "5", false, false},
		{"cache behind", "7", "5", false, true},
		{"cache caught up", "7", "7", false, false},
		{"caught up while the copy was taken", "7", "5", true, true},
		{"caught up before the copy was taken", "7", "7", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newOwnWrites()
			if tt.wrote != "" {
				w.wrote(k, tt.wrote)
			}
			get := func(Key) (*unstructured.Unstructured, bool) {
				if tt.catchUp {
					w.stale(k, tt.wrote) // onPrimary on the write's event
				}
				return at(tt.cached), true
			}
			obj, ok, stale := w.fromCache(k, get)
			if !ok || obj.GetResourceVersion() != tt.cached {
				t.Fatalf("fromCache = %v, %v", obj, ok)
			}
			if stale != tt.wantStale {
				t.Errorf("stale = %v, want %v", stale, tt.wantStale)
			}
			if !stale && w.len() != 0 {
				t.Errorf("a copy that has the write left %d entries", w.len())
			}
		})
	}
	w := newOwnWrites()
	if _, ok, stale := w.fromCache(k, func(Key) (*unstructured.Unstructured, bool) { return nil, false }); ok || stale {
		t.Errorf("fromCache of a missing object = %v, %v", ok, stale)
	}
}
