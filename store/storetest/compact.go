package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

func (s suite) testCompaction(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	mustCreate(t, ctx, st, store.ObjectKey("g", "other", "", "x"), doc("x"))
	base := mustRev(t, ctx, st)
	events := history(t, ctx, st, 30)
	mid := events[14].Revision()
	end := events[len(events)-1].Revision()
	page, err := st.List(ctx, widgets, store.ListOptions{Revision: mid - 2, Limit: 1})
	if err != nil || page.Continue == "" {
		t.Fatalf("List before compaction: %v, %+v", err, page)
	}
	atMid, err := st.List(ctx, widgets, store.ListOptions{Revision: mid})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx, mid); err != nil {
		t.Fatalf("Compact(%d): %v", mid, err)
	}

	t.Run("errors below", func(t *testing.T) {
		tests := []struct {
			name string
			call func() error
		}{
			{"Get", func() error { _, err := st.Get(ctx, key(1), store.GetOptions{Revision: mid - 1}); return err }},
			{"Get oldest", func() error { _, err := st.Get(ctx, key(1), store.GetOptions{Revision: base}); return err }},
			{"List", func() error { _, err := st.List(ctx, widgets, store.ListOptions{Revision: mid - 1}); return err }},
			{"Continue", func() error {
				_, err := st.List(ctx, widgets, store.ListOptions{Continue: page.Continue, Limit: 1})
				return err
			}},
			{"Watch", func() error {
				w, err := st.Watch(ctx, widgets, mid-1)
				if err == nil {
					w.Stop()
				}
				return err
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) { wantErr(t, tt.name, tt.call(), store.ErrCompacted) })
		}
	})

	t.Run("kept from compacted revision", func(t *testing.T) {
		got, err := st.List(ctx, widgets, store.ListOptions{Revision: mid})
		if err != nil {
			t.Fatalf("List at the compacted revision: %v", err)
		}
		if d := cmp.Diff(atMid.Items, got.Items); d != "" {
			t.Errorf("List at %d (-before +after compaction):\n%s", mid, d)
		}
		w, err := st.Watch(ctx, widgets, mid)
		if err != nil {
			t.Fatalf("Watch from the compacted revision: %v", err)
		}
		defer w.Stop()
		if d := cmp.Diff(events[15:], collect(t, ctx, w, end)); d != "" {
			t.Errorf("watch from %d (-want +got):\n%s", mid, d)
		}
		for _, ev := range events[15:] {
			kv, err := st.Get(ctx, ev.Object.Key, store.GetOptions{Revision: ev.Revision()})
			if ev.Type == store.Deleted {
				wantErr(t, "Get deleted", err, store.ErrNotFound)
				continue
			}
			if err != nil || kv.ModRevision != ev.Revision() {
				t.Errorf("Get %s at %d: %v, %+v", ev.Object.Key, ev.Revision(), err, kv)
			}
		}
	})

	t.Run("again and future", func(t *testing.T) {
		// Backends may accept it as a no-op or refuse it as compacted.
		if err := st.Compact(ctx, mid-3); err != nil && !errors.Is(err, store.ErrCompacted) {
			t.Errorf("Compact below the compacted revision: %v", err)
		}
		if _, err := st.Get(ctx, key(1), store.GetOptions{Revision: mid - 1}); err == nil {
			t.Errorf("an older Compact brought history back")
		}
		wantErr(t, "Compact in the future", st.Compact(ctx, end+1), store.ErrFutureRevision)
		if err := st.Compact(ctx, end); err != nil {
			t.Fatalf("Compact(current): %v", err)
		}
		r := mustCreate(t, ctx, st, key(99), doc("after"))
		if r != end+1 {
			t.Errorf("revision after compacting everything: %d, want %d", r, end+1)
		}
		res, err := st.List(ctx, widgets, store.ListOptions{})
		if err != nil || len(res.Items) == 0 {
			t.Fatalf("List after compacting everything: %v, %+v", err, res)
		}
	})
}

func (s suite) testClose(t *testing.T) {
	ctx := testCtx(t)
	st := s.newStore(t)
	mustCreate(t, ctx, st, key(1), doc("a"))
	w, err := st.Watch(ctx, widgets, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range w.Events() {
	}
	if err := w.Err(); err != store.ErrClosed {
		t.Errorf("watcher Err after Close: %v, want ErrClosed", err)
	}
	w.Stop()
	tests := []struct {
		name string
		call func() error
	}{
		{"Create", func() error { _, err := st.Create(ctx, key(2), doc("b")); return err }},
		{"Update", func() error { _, err := st.Update(ctx, key(1), doc("b"), 0); return err }},
		{"Delete", func() error { _, _, err := st.Delete(ctx, key(1), 0); return err }},
		{"Get", func() error { _, err := st.Get(ctx, key(1), store.GetOptions{}); return err }},
		{"List", func() error { _, err := st.List(ctx, widgets, store.ListOptions{}); return err }},
		{"Watch", func() error { _, err := st.Watch(ctx, widgets, 0); return err }},
		{"Compact", func() error { return st.Compact(ctx, 1) }},
		{"CurrentRevision", func() error { _, err := st.CurrentRevision(ctx); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErr(t, tt.name, tt.call(), store.ErrClosed) })
	}
}
