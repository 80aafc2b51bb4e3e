package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// skewedStore answers continued lists (or, with first, first pages) at
// another revision than the one they are read at, as no conforming backend
// does.
type skewedStore struct {
	store.Store
	first bool
}

func (s skewedStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	res, err := s.Store.List(ctx, prefix, opts)
	if err == nil && (opts.Continue == "") == s.first {
		res.Revision++
	}
	return res, err
}

// TestListPagesRevisionChecked: ListPages refuses pages that are not at the
// revision of the first, or a first page not at the revision asked for,
// rather than hand its caller a list mixed from several revisions. The
// conformance suite (storetest) checks it against real backends.
func TestListPagesRevisionChecked(t *testing.T) {
	ctx := t.Context()
	db, prefix, rev := widgetStore(t, "a", "b", "c")

	tests := []struct {
		name    string
		st      store.Store
		opts    store.ListOptions
		wantErr int // after how many pages ListPages fails; -1 for none
		wantRev int64
	}{
		{name: "conforming", st: db, opts: store.ListOptions{Limit: 1}, wantErr: -1},
		{name: "conforming at a revision", st: db, opts: store.ListOptions{Revision: rev, Limit: 1}, wantErr: -1},
		{name: "continued pages at another revision", st: skewedStore{Store: db}, opts: store.ListOptions{Limit: 1}, wantErr: 1, wantRev: rev},
		{name: "one page", st: skewedStore{Store: db}, opts: store.ListOptions{}, wantErr: -1},
		{name: "first page at another revision", st: skewedStore{Store: db, first: true}, opts: store.ListOptions{Revision: rev, Limit: 1}, wantErr: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := 0
			got, err := store.ListPages(ctx, tt.st, prefix, tt.opts, func([]store.KeyValue) error { pages++; return nil })
			if tt.wantErr >= 0 {
				if err == nil || got != tt.wantRev || pages != tt.wantErr {
					t.Errorf("ListPages: revision %d, %v after %d pages; want %d and an error after %d", got, err, pages, tt.wantRev, tt.wantErr)
				}
				return
			}
			if err != nil || got != rev {
				t.Errorf("ListPages: revision %d, %v; want %d", got, err, rev)
			}
		})
	}
}

// emptyPagesStore answers every other List with an empty page whose token
// continues where that List would have started, as a backend that bounds
// the documents one page may scan (and its Filter dropped them all) may.
type emptyPagesStore struct {
	store.Store
	calls *int
}

func (s emptyPagesStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	*s.calls++
	if *s.calls%2 == 0 {
		return s.Store.List(ctx, prefix, opts)
	}
	rev, start := opts.Revision, prefix
	if opts.Continue != "" {
		var err error
		if rev, start, err = store.DecodeContinue(opts.Continue, prefix); err != nil {
			return nil, err
		}
	}
	if rev == 0 {
		res, err := s.Store.List(ctx, prefix, store.ListOptions{Limit: 1, KeysOnly: true})
		if err != nil {
			return nil, err
		}
		rev = res.Revision
	}
	return &store.ListResult{Revision: rev, Continue: store.EncodeContinue(rev, start)}, nil
}

// TestListPagesBoundaries: Limit 0 is one page of everything; a Filter
// that drops every document gives one empty page, not an error or a loop;
// empty pages with a token are passed on and the list goes on, all at the
// first page's revision.
func TestListPagesBoundaries(t *testing.T) {
	ctx := t.Context()
	names := []string{"a", "b", "c", "d", "e"}
	db, prefix, rev := widgetStore(t, names...)
	var want []string
	for _, name := range names {
		want = append(want, store.ObjectKey("g", "widgets", "", name))
	}
	none := func(string, []byte) bool { return false }
	calls := 0
	tests := []struct {
		name  string
		st    store.Store
		opts  store.ListOptions
		sizes []int // the items of each page
	}{
		{name: "limit 0", st: db, sizes: []int{5}},
		{name: "limit past the end", st: db, opts: store.ListOptions{Limit: 5}, sizes: []int{5}},
		{name: "limit 2", st: db, opts: store.ListOptions{Limit: 2}, sizes: []int{2, 2, 1}},
		{name: "filter drops all", st: db, opts: store.ListOptions{Limit: 1, Filter: none}, sizes: []int{0}},
		{name: "filter drops all, limit 0", st: db, opts: store.ListOptions{Filter: none}, sizes: []int{0}},
		{name: "empty pages with a token", st: emptyPagesStore{Store: db, calls: &calls}, opts: store.ListOptions{Limit: 2}, sizes: []int{0, 2, 0, 2, 0, 1}},
		{name: "empty pages at a revision", st: emptyPagesStore{Store: db, calls: &calls}, opts: store.ListOptions{Revision: rev, Limit: 3}, sizes: []int{0, 3, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls = 0
			var sizes []int
			var keys []string
			got, err := store.ListPages(ctx, tt.st, prefix, tt.opts, func(items []store.KeyValue) error {
				sizes = append(sizes, len(items))
				for _, kv := range items {
					keys = append(keys, kv.Key)
				}
				return nil
			})
			if err != nil || got != rev {
				t.Fatalf("ListPages: revision %d, %v; want %d", got, err, rev)
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("page sizes %v, want %v", sizes, tt.sizes)
			}
			wantKeys := want
			if tt.opts.Filter != nil {
				wantKeys = nil
			}
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("keys %v, want %v", keys, wantKeys)
			}
		})
	}
}

// widgetStore opens a Badger store in a temp dir holding an empty document
// for each of names under the prefix it returns, and the revision after.
func widgetStore(t *testing.T, names ...string) (db *badger.DB, prefix string, rev int64) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, name := range names {
		if _, err := db.Create(t.Context(), store.ObjectKey("g", "widgets", "", name), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if rev, err = db.CurrentRevision(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db, store.ResourcePrefix("g", "widgets", ""), rev
}
