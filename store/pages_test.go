package store_test

import (
	"context"
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
	db, err := badger.Open(t.TempDir(), badger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	prefix := store.ResourcePrefix("g", "widgets", "")
	for _, name := range []string{"a", "b", "c"} {
		if _, err := db.Create(ctx, store.ObjectKey("g", "widgets", "", name), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}

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
