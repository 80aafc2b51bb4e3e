package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

// testListPages checks store.ListPages against the backend: every page at
// the revision of the first while writes go on between pages, early stops
// and the errors it passes on.
func (s suite) testListPages(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	for i := range 10 {
		mustCreate(t, ctx, st, key(i), doc("a"))
	}
	rev0 := mustRev(t, ctx, st)
	atRev0, err := st.List(ctx, widgets, store.ListOptions{Revision: rev0})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("writes between pages", func(t *testing.T) {
		var got []store.KeyValue
		var sizes []int
		rev, err := store.ListPages(ctx, st, widgets, store.ListOptions{Limit: 3}, func(items []store.KeyValue) error {
			got = append(got, items...)
			sizes = append(sizes, len(items))
			// Change a listed key, delete one not listed yet, add one after them all.
			n := len(sizes)
			mustUpdate(t, ctx, st, key(0), doc(fmt.Sprint("b", n)), 0)
			mustDelete(t, ctx, st, key(10-n), 0)
			mustCreate(t, ctx, st, key(100+n), doc("c"))
			return nil
		})
		if err != nil || rev != rev0 {
			t.Fatalf("ListPages: revision %d, %v; want %d", rev, err, rev0)
		}
		if d := cmp.Diff(atRev0.Items, got); d != "" {
			t.Errorf("items (-list at %d +pages):\n%s", rev0, d)
		}
		if d := cmp.Diff([]int{3, 3, 3, 1}, sizes); d != "" {
			t.Errorf("page sizes (-want +got):\n%s", d)
		}
	})

	t.Run("from a revision", func(t *testing.T) {
		var got []store.KeyValue
		rev, err := store.ListPages(ctx, st, widgets, store.ListOptions{Revision: rev0, Limit: 4}, func(items []store.KeyValue) error {
			got = append(got, items...)
			return nil
		})
		if err != nil || rev != rev0 {
			t.Fatalf("ListPages at %d: revision %d, %v", rev0, rev, err)
		}
		if d := cmp.Diff(atRev0.Items, got); d != "" {
			t.Errorf("items (-list at %d +pages):\n%s", rev0, d)
		}
	})

	cur := mustRev(t, ctx, st)
	errPage := errors.New("page failed")
	tests := []struct {
		name      string
		opts      store.ListOptions
		stopAt    int   // the call of page that returns stop
		stop      error // what it returns
		wantErr   error
		wantRev   int64
		wantCalls int
	}{
		{name: "stop", opts: store.ListOptions{Limit: 2}, stopAt: 2, stop: store.StopPages, wantRev: cur, wantCalls: 2},
		{name: "page error", opts: store.ListOptions{Limit: 2}, stopAt: 3, stop: errPage, wantErr: errPage, wantRev: cur, wantCalls: 3},
		{name: "list error", opts: store.ListOptions{Revision: cur + 1, Limit: 2}, wantErr: store.ErrFutureRevision},
		{name: "bad token", opts: store.ListOptions{Continue: "%", Limit: 2}, wantErr: store.ErrInvalidContinue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			rev, err := store.ListPages(ctx, st, widgets, tt.opts, func([]store.KeyValue) error {
				if calls++; calls == tt.stopAt {
					return tt.stop
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("ListPages: %v, want %v", err, tt.wantErr)
			}
			if rev != tt.wantRev || calls != tt.wantCalls {
				t.Errorf("ListPages: revision %d after %d pages, want %d after %d", rev, calls, tt.wantRev, tt.wantCalls)
			}
		})
	}

	t.Run("filter only", func(t *testing.T) {
		var keys []string
		opts := store.ListOptions{Limit: 2, Filter: func(k string, _ []byte) bool {
			keys = append(keys, k)
			return false
		}}
		rev, err := store.ListPages(ctx, st, widgets, opts, nil)
		if err != nil || rev != cur {
			t.Fatalf("ListPages: revision %d, %v; want %d", rev, err, cur)
		}
		all, err := st.List(ctx, widgets, store.ListOptions{Revision: cur})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(keysOf(all.Items), keys); d != "" {
			t.Errorf("keys filtered (-want +got):\n%s", d)
		}
	})
}
