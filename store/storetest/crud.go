package storetest

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

func (s suite) testCreateGet(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	rev0 := mustRev(t, ctx, st)
	if rev0 < 1 {
		t.Errorf("a new store is at revision %d; it must start at 1 or more", rev0)
	}
	empty, err := st.List(ctx, widgets, store.ListOptions{})
	if err != nil || empty.Revision != rev0 || len(empty.Items) != 0 {
		t.Errorf("List of a new store: %v, %+v; want no items at revision %d", err, empty, rev0)
	}
	rev := mustCreate(t, ctx, st, key(1), doc("a"))
	if rev != rev0+1 {
		t.Errorf("Create revision %d, want %d", rev, rev0+1)
	}
	got, err := st.Get(ctx, key(1), store.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := &store.KeyValue{Key: key(1), Value: doc("a"), CreateRevision: rev, ModRevision: rev}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	_, err = st.Create(ctx, key(1), doc("b"))
	wantErr(t, "Create existing", err, store.ErrAlreadyExists)
	_, err = st.Get(ctx, key(2), store.GetOptions{})
	wantErr(t, "Get missing", err, store.ErrNotFound)
	if r := mustRev(t, ctx, st); r != rev {
		t.Errorf("CurrentRevision %d after a failed create, want %d", r, rev)
	}

	// The store keeps its own copy of the document.
	v := doc("c")
	rev = mustCreate(t, ctx, st, key(3), v)
	v[2] = 'X'
	got, err = st.Get(ctx, key(3), store.GetOptions{})
	if err != nil || !bytes.Equal(got.Value, doc("c")) {
		t.Errorf("Get after the caller changed its slice: %v, %+v", err, got)
	}

	// A document may be created again after a delete, with a new CreateRevision.
	mustDelete(t, ctx, st, key(3), rev)
	rev = mustCreate(t, ctx, st, key(3), doc("d"))
	got, err = st.Get(ctx, key(3), store.GetOptions{})
	if err != nil || got.CreateRevision != rev || got.ModRevision != rev {
		t.Errorf("Get recreated: %v, %+v, want create and mod revision %d", err, got, rev)
	}
}

func (s suite) testCompareAndSwap(t *testing.T) {
	type step struct {
		op      string // create, update, delete
		key     int
		exp     int64 // expected revision; -1 means "the current one"; -2 a stale one
		wantErr error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"create existing", []step{{"create", 1, 0, nil}, {"create", 1, 0, store.ErrAlreadyExists}}},
		{"update current", []step{{"create", 1, 0, nil}, {"update", 1, -1, nil}, {"update", 1, -1, nil}}},
		{"update stale", []step{{"create", 1, 0, nil}, {"update", 1, -1, nil}, {"update", 1, -2, store.ErrConflict}}},
		{"update unconditional", []step{{"create", 1, 0, nil}, {"update", 1, -1, nil}, {"update", 1, 0, nil}}},
		{"update missing", []step{{"update", 1, 0, store.ErrNotFound}, {"update", 1, 5, store.ErrNotFound}}},
		{"delete current", []step{{"create", 1, 0, nil}, {"delete", 1, -1, nil}, {"delete", 1, 0, store.ErrNotFound}}},
		{"delete stale", []step{{"create", 1, 0, nil}, {"update", 1, -1, nil}, {"delete", 1, -2, store.ErrConflict}}},
		{"delete unconditional", []step{{"create", 1, 0, nil}, {"update", 1, 0, nil}, {"delete", 1, 0, nil}}},
		{"delete missing", []step{{"delete", 1, 0, store.ErrNotFound}}},
		{"update after delete", []step{{"create", 1, 0, nil}, {"delete", 1, 0, nil}, {"update", 1, 0, store.ErrNotFound}}},
		{"other key untouched", []step{{"create", 1, 0, nil}, {"create", 2, 0, nil}, {"update", 2, -1, nil}, {"update", 1, -1, nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			st := s.open(t)
			cur := map[int]int64{}  // key -> ModRevision
			prev := map[int]int64{} // key -> the ModRevision before cur
			for i, sp := range tt.steps {
				exp := sp.exp
				switch exp {
				case -1:
					exp = cur[sp.key]
				case -2:
					exp = prev[sp.key]
				}
				before := mustRev(t, ctx, st)
				var rev int64
				var err error
				switch sp.op {
				case "create":
					rev, err = st.Create(ctx, key(sp.key), doc(sp.op))
				case "update":
					rev, err = st.Update(ctx, key(sp.key), doc(sp.op), exp)
				case "delete":
					var old *store.KeyValue
					old, rev, err = st.Delete(ctx, key(sp.key), exp)
					if err == nil && (old == nil || old.ModRevision != cur[sp.key] || old.Key != key(sp.key)) {
						t.Errorf("step %d: Delete returned %+v, want the document at %d", i, old, cur[sp.key])
					}
				}
				if sp.wantErr != nil {
					wantErr(t, "step "+sp.op, err, sp.wantErr)
					if after := mustRev(t, ctx, st); after != before {
						t.Errorf("step %d: failed %s moved the revision %d -> %d", i, sp.op, before, after)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d %s: %v", i, sp.op, err)
				}
				if rev != before+1 {
					t.Errorf("step %d: revision %d, want %d", i, rev, before+1)
				}
				prev[sp.key], cur[sp.key] = cur[sp.key], rev
				got, err := st.Get(ctx, key(sp.key), store.GetOptions{})
				if sp.op == "delete" {
					wantErr(t, "Get after delete", err, store.ErrNotFound)
				} else if err != nil || got.ModRevision != rev {
					t.Errorf("step %d: Get: %v, %+v, want ModRevision %d", i, err, got, rev)
				}
			}
		})
	}
}

func (s suite) testRevisionsConsecutive(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	last := mustRev(t, ctx, st)
	for i := range 50 {
		var rev int64
		switch i % 3 {
		case 0:
			rev = mustCreate(t, ctx, st, key(i), doc("x"))
		case 1:
			rev = mustUpdate(t, ctx, st, key(i-1), doc("y"), 0)
		case 2:
			rev = mustDelete(t, ctx, st, key(i-2), 0)
		}
		if rev != last+1 {
			t.Fatalf("write %d: revision %d, want %d", i, rev, last+1)
		}
		last = rev
		if cur := mustRev(t, ctx, st); cur != rev {
			t.Fatalf("CurrentRevision %d, want %d", cur, rev)
		}
	}
}

func (s suite) testGetAtRevision(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	mustCreate(t, ctx, st, key(9), doc("first")) // so that r1-1 is a real revision
	r1 := mustCreate(t, ctx, st, key(1), doc("v1"))
	r2 := mustUpdate(t, ctx, st, key(1), doc("v2"), r1)
	r3 := mustCreate(t, ctx, st, key(2), doc("other"))
	r4 := mustDelete(t, ctx, st, key(1), r2)
	r5 := mustCreate(t, ctx, st, key(1), doc("v3"))
	tests := []struct {
		name    string
		rev     int64
		want    *store.KeyValue
		wantErr error
	}{
		{"before create", r1 - 1, nil, store.ErrNotFound},
		{"at create", r1, &store.KeyValue{Key: key(1), Value: doc("v1"), CreateRevision: r1, ModRevision: r1}, nil},
		{"at update", r2, &store.KeyValue{Key: key(1), Value: doc("v2"), CreateRevision: r1, ModRevision: r2}, nil},
		{"unrelated write", r3, &store.KeyValue{Key: key(1), Value: doc("v2"), CreateRevision: r1, ModRevision: r2}, nil},
		{"at delete", r4, nil, store.ErrNotFound},
		{"recreated", r5, &store.KeyValue{Key: key(1), Value: doc("v3"), CreateRevision: r5, ModRevision: r5}, nil},
		{"current", 0, &store.KeyValue{Key: key(1), Value: doc("v3"), CreateRevision: r5, ModRevision: r5}, nil},
		{"future", r5 + 1, nil, store.ErrFutureRevision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.Get(ctx, key(1), store.GetOptions{Revision: tt.rev})
			if tt.wantErr != nil {
				wantErr(t, "Get", err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("Get at %d: %v", tt.rev, err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Get at %d (-want +got):\n%s", tt.rev, d)
			}
		})
	}
}
