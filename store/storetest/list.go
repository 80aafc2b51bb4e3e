package storetest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpoint-dev/setpoint/store"
)

func keysOf(items []store.KeyValue) []string {
	out := make([]string, len(items))
	for i, kv := range items {
		out[i] = kv.Key
	}
	return out
}

func (s suite) testListAtRevision(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	var revs []int64
	for i := range 5 {
		revs = append(revs, mustCreate(t, ctx, st, key(i), doc("a")))
	}
	rUpd := mustUpdate(t, ctx, st, key(1), doc("b"), 0)
	rDel := mustDelete(t, ctx, st, key(3), 0)
	tests := []struct {
		name     string
		rev      int64
		wantKeys []string
		wantRev  int64
	}{
		{"after two creates", revs[1], []string{key(0), key(1)}, revs[1]},
		{"after all creates", revs[4], []string{key(0), key(1), key(2), key(3), key(4)}, revs[4]},
		{"after delete", rDel, []string{key(0), key(1), key(2), key(4)}, rDel},
		{"current", 0, []string{key(0), key(1), key(2), key(4)}, rDel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := st.List(ctx, widgets, store.ListOptions{Revision: tt.rev})
			if err != nil {
				t.Fatalf("List at %d: %v", tt.rev, err)
			}
			if d := cmp.Diff(tt.wantKeys, keysOf(res.Items)); d != "" {
				t.Errorf("keys (-want +got):\n%s", d)
			}
			if res.Revision != tt.wantRev || res.Continue != "" {
				t.Errorf("Revision %d, Continue %q; want %d and none", res.Revision, res.Continue, tt.wantRev)
			}
		})
	}
	res, err := st.List(ctx, widgets, store.ListOptions{Revision: revs[4]})
	if err != nil {
		t.Fatal(err)
	}
	if kv := res.Items[1]; string(kv.Value) != string(doc("a")) || kv.ModRevision != revs[1] || kv.CreateRevision != revs[1] {
		t.Errorf("item at old revision: %+v", kv)
	}
	res, err = st.List(ctx, widgets, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kv := res.Items[1]; string(kv.Value) != string(doc("b")) || kv.ModRevision != rUpd || kv.CreateRevision != revs[1] {
		t.Errorf("updated item: %+v", kv)
	}
	_, err = st.List(ctx, widgets, store.ListOptions{Revision: rDel + 1})
	wantErr(t, "List in the future", err, store.ErrFutureRevision)
}

func (s suite) testListPrefix(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	keys := []string{
		store.ObjectKey("g", "widgets", "a", "x"),
		store.ObjectKey("g", "widgets", "ab", "y"),
		store.ObjectKey("g", "widgets", "b", "z"),
		store.ObjectKey("g", "widgetsx", "a", "x"),
		store.ObjectKey("g", "widgets", "", "cluster"),
	}
	for _, k := range keys {
		mustCreate(t, ctx, st, k, doc(k))
	}
	tests := []struct {
		name   string
		prefix string
		want   []string
	}{
		{"namespace", store.ResourcePrefix("g", "widgets", "a"), []string{keys[0]}},
		{"resource", store.ResourcePrefix("g", "widgets", ""), []string{keys[0], keys[1], keys[2], keys[4]}},
		{"none", store.ResourcePrefix("g", "gadgets", ""), nil},
		{"everything", "", []string{keys[0], keys[1], keys[2], keys[4], keys[3]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := st.List(ctx, tt.prefix, store.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string(nil), tt.want...)
			sort.Strings(want)
			if d := cmp.Diff(want, keysOf(res.Items), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("keys (-want +got):\n%s", d)
			}
			for _, kv := range res.Items {
				if string(kv.Value) != string(doc(kv.Key)) {
					t.Errorf("%s holds %q", kv.Key, kv.Value)
				}
			}
		})
	}
}

// pages lists prefix page by page and checks every page reports rev0 (the
// first page's revision when rev0 is 0).
func pages(t *testing.T, st store.Store, prefix string, opts store.ListOptions, between func()) ([]store.KeyValue, int64, int) {
	t.Helper()
	ctx := testCtx(t)
	var all []store.KeyValue
	var rev int64
	n := 0
	for {
		res, err := st.List(ctx, prefix, opts)
		if err != nil {
			t.Fatalf("List page %d: %v", n, err)
		}
		if n == 0 {
			rev = res.Revision
		} else if res.Revision != rev {
			t.Fatalf("page %d at revision %d, first page at %d", n, res.Revision, rev)
		}
		if opts.Limit > 0 && int64(len(res.Items)) > opts.Limit {
			t.Fatalf("page %d has %d items, limit %d", n, len(res.Items), opts.Limit)
		}
		if res.Continue != "" && int64(len(res.Items)) != opts.Limit {
			t.Fatalf("page %d has %d items and a continue token, limit %d", n, len(res.Items), opts.Limit)
		}
		all = append(all, res.Items...)
		n++
		if res.Continue == "" {
			return all, rev, n
		}
		opts.Continue = res.Continue
		opts.Revision = 0
		if between != nil {
			between()
		}
	}
}

func (s suite) testListPagination(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	for i := 0; i < 50; i += 2 {
		mustCreate(t, ctx, st, key(i), doc("a"))
	}
	want, err := st.List(ctx, widgets, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Between pages, writes land before, inside and after the rest of the list.
	next := 1
	between := func() {
		mustCreate(t, ctx, st, key(next), doc("new"))
		mustUpdate(t, ctx, st, key(48), doc("changed"), 0)
		mustCreate(t, ctx, st, key(100+next), doc("new"))
		next += 2
	}
	for _, limit := range []int64{1, 7, 25, 26} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			before := mustRev(t, ctx, st)
			res, err := st.List(ctx, widgets, store.ListOptions{Revision: want.Revision})
			if err != nil {
				t.Fatal(err)
			}
			got, rev, n := pages(t, st, widgets, store.ListOptions{Limit: limit, Revision: want.Revision}, between)
			if rev != want.Revision {
				t.Errorf("pages at revision %d, want %d", rev, want.Revision)
			}
			if d := cmp.Diff(res.Items, got); d != "" {
				t.Errorf("paged list differs from the list at its revision (-want +got):\n%s", d)
			}
			if wantPages := (25 + limit - 1) / limit; int64(n) != wantPages {
				t.Errorf("%d pages, want %d", n, wantPages)
			}
			if mustRev(t, ctx, st) == before && n > 1 {
				t.Errorf("no writes happened between pages")
			}
		})
	}
	t.Run("current revision", func(t *testing.T) {
		cur, err := st.List(ctx, widgets, store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, rev, _ := pages(t, st, widgets, store.ListOptions{Limit: 10}, between)
		if rev != cur.Revision {
			t.Errorf("first page at %d, want %d", rev, cur.Revision)
		}
		if d := cmp.Diff(cur.Items, got); d != "" {
			t.Errorf("paged list (-want +got):\n%s", d)
		}
	})
}

func (s suite) testListFilterLimit(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	for i := range 40 {
		v := doc("odd")
		if i%2 == 0 {
			v = doc("even")
		}
		mustCreate(t, ctx, st, key(i), v)
	}
	even := func(k string, v []byte) bool { return strings.Contains(string(v), "even") }
	none := func(string, []byte) bool { return false }
	lastOnly := func(k string, _ []byte) bool { return k == key(39) }
	tests := []struct {
		name   string
		filter func(string, []byte) bool
		limit  int64
		want   int
	}{
		{"even, limit 3", even, 3, 20},
		{"even, limit 20", even, 20, 20},
		{"even, no limit", even, 0, 20},
		{"none", none, 5, 0},
		{"last only", lastOnly, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _ := pages(t, st, widgets, store.ListOptions{Limit: tt.limit, Filter: tt.filter}, nil)
			if len(got) != tt.want {
				t.Errorf("%d items, want %d", len(got), tt.want)
			}
			for _, kv := range got {
				if !tt.filter(kv.Key, kv.Value) {
					t.Errorf("item %s passed a filter that rejects it", kv.Key)
				}
			}
		})
	}
}

func (s suite) testContinueErrors(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	for i := range 10 {
		mustCreate(t, ctx, st, key(i), doc("a"))
	}
	first, err := st.List(ctx, widgets, store.ListOptions{Limit: 3})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, %+v", err, first)
	}
	tests := []struct {
		name   string
		prefix string
		token  string
	}{
		{"garbage", widgets, "not a token!"},
		{"empty bytes", widgets, "AA"},
		{"truncated", widgets, first.Continue[:2]},
		{"other prefix", store.ResourcePrefix("g", "other", ""), first.Continue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.List(ctx, tt.prefix, store.ListOptions{Continue: tt.token, Limit: 3})
			wantErr(t, "List with "+tt.name, err, store.ErrInvalidContinue)
		})
	}
	t.Run("compacted", func(t *testing.T) {
		for i := range 5 {
			mustUpdate(t, ctx, st, key(i), doc("b"), 0)
		}
		if err := st.Compact(ctx, mustRev(t, ctx, st)); err != nil {
			t.Fatal(err)
		}
		_, err := st.List(ctx, widgets, store.ListOptions{Continue: first.Continue, Limit: 3})
		wantErr(t, "List with a compacted token", err, store.ErrCompacted)
	})
}

// testListConsistencyConcurrent lists while writers create and delete keys,
// then checks every list against the acknowledged writes: at revision R a key
// is listed if and only if it was created at or before R and not deleted by R.
func (s suite) testListConsistencyConcurrent(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	const writers, perWriter = 4, 30
	type life struct{ created, deleted int64 }
	var mu sync.Mutex
	lives := map[string]*life{}
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				k := store.ObjectKey("g", "things", "", fmt.Sprintf("w%d-%03d", w, i))
				rev, err := st.Create(ctx, k, doc(k))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				lives[k] = &life{created: rev}
				mu.Unlock()
				if i%3 == 2 {
					k := store.ObjectKey("g", "things", "", fmt.Sprintf("w%d-%03d", w, i-1))
					_, rev, err := st.Delete(ctx, k, 0)
					if err != nil {
						errc <- err
						return
					}
					mu.Lock()
					lives[k].deleted = rev
					mu.Unlock()
				}
			}
		})
	}
	var lists []*store.ListResult
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		res, err := st.List(ctx, store.ResourcePrefix("g", "things", ""), store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, res)
	}
	close(errc)
	for err := range errc {
		t.Fatalf("writer: %v", err)
	}
	if len(lists) < 2 {
		t.Fatalf("only %d lists ran during the writes", len(lists))
	}
	for _, res := range lists {
		var want []string
		for k, l := range lives {
			if l.created <= res.Revision && (l.deleted == 0 || l.deleted > res.Revision) {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		if d := cmp.Diff(want, keysOf(res.Items), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("list at %d (-want +got):\n%s", res.Revision, d)
		}
	}
}

// testListKeysOnly: a keys-only list gives every key with its ModRevision,
// no document and no CreateRevision, in pages, and filters by key.
func (s suite) testListKeysOnly(t *testing.T) {
	ctx := testCtx(t)
	st := s.open(t)
	revs := map[string]int64{}
	for i := range 25 {
		revs[key(i)] = mustCreate(t, ctx, st, key(i), doc(strings.Repeat("x", i)))
	}
	// An update moves a key's ModRevision.
	upd, err := st.Update(ctx, key(3), doc("changed"), revs[key(3)])
	if err != nil {
		t.Fatal(err)
	}
	revs[key(3)] = upd
	got, _, n := pages(t, st, widgets, store.ListOptions{KeysOnly: true, Limit: 10}, nil)
	if len(got) != 25 || n != 3 {
		t.Fatalf("keys-only list: %d items in %d pages, want 25 in 3", len(got), n)
	}
	for _, kv := range got {
		if kv.Value != nil || kv.CreateRevision != 0 || kv.ModRevision != revs[kv.Key] {
			t.Errorf("keys-only item %s: value %q, createRevision %d, modRevision %d (want %d)", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, revs[kv.Key])
		}
	}
	var sawValue bool
	odd := func(k string, v []byte) bool {
		sawValue = sawValue || v != nil
		return k[len(k)-1]%2 == 1
	}
	got, _, _ = pages(t, st, widgets, store.ListOptions{KeysOnly: true, Filter: odd}, nil)
	if len(got) == 0 || sawValue {
		t.Errorf("keys-only list with a filter: %d items, filter saw a value %v", len(got), sawValue)
	}
	for _, kv := range got {
		if kv.Key[len(kv.Key)-1]%2 != 1 {
			t.Errorf("item %s passed a filter that rejects it", kv.Key)
		}
	}
}
