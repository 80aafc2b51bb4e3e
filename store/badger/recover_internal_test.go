package badger

import (
	"context"
	"testing"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

// TestRecoverTornGroup writes a group's history record without its index
// entries, as a crash between the two requests of a group commit leaves it,
// and checks that reopening completes the group.
func TestRecoverTornGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := db.Create(ctx, "/g/r/a", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	// The torn group: update a, create b.
	evs := []store.Event{
		{Type: store.Modified, Object: store.KeyValue{Key: "/g/r/a", Value: []byte(`{"a":2}`), CreateRevision: r1, ModRevision: r1 + 1}},
		{Type: store.Added, Object: store.KeyValue{Key: "/g/r/b", Value: []byte(`{"b":1}`), CreateRevision: r1 + 2, ModRevision: r1 + 2}},
	}
	var rec []byte
	for i := range evs {
		rec = appendRecordEvent(rec, &evs[i])
	}
	wb := db.bdb.NewManagedWriteBatch()
	if err := wb.SetEntryAt(bdg.NewEntry(historyKey(r1+2), rec), uint64(r1+2)); err != nil {
		t.Fatal(err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cur, _ := db.CurrentRevision(ctx); cur != r1+2 {
		t.Errorf("reopened at revision %d, want %d", cur, r1+2)
	}
	for _, want := range evs {
		kv, err := db.Get(ctx, want.Object.Key, store.GetOptions{})
		if err != nil || kv.ModRevision != want.Object.ModRevision || string(kv.Value) != string(want.Object.Value) {
			t.Errorf("Get %s: %v %+v, want %+v", want.Object.Key, err, kv, want.Object)
		}
	}
	w, err := db.Watch(ctx, "/g/", r1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range evs {
		ev := <-w.Events()
		if ev.Revision() != want.Revision() || ev.Type != want.Type {
			t.Errorf("event %+v, want %+v", ev, want)
		}
		if ev.Type == store.Modified && (ev.Prev == nil || string(ev.Prev.Value) != `{"a":1}`) {
			t.Errorf("Prev %+v, want the document at %d", ev.Prev, r1)
		}
	}
	if r, err := db.Create(ctx, "/g/r/c", nil); err != nil || r != r1+3 {
		t.Errorf("next write at %d (%v), want %d", r, err, r1+3)
	}
}

// TestReopen checks that a clean close keeps revisions, history and the
// compacted revision.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var revs []int64
	for i := range 10 {
		r, err := db.Update(ctx, "/g/r/a", []byte{byte('0' + i)}, 0)
		if i == 0 {
			r, err = db.Create(ctx, "/g/r/a", []byte{'0'})
		}
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r)
	}
	if err := db.Compact(ctx, revs[4]); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cur, _ := db.CurrentRevision(ctx); cur != revs[9] {
		t.Errorf("reopened at %d, want %d", cur, revs[9])
	}
	if _, err := db.Get(ctx, "/g/r/a", store.GetOptions{Revision: revs[3]}); err == nil {
		t.Errorf("Get below the compacted revision after reopen succeeded")
	}
	kv, err := db.Get(ctx, "/g/r/a", store.GetOptions{Revision: revs[6]})
	if err != nil || string(kv.Value) != "6" {
		t.Errorf("Get at %d after reopen: %v %+v", revs[6], err, kv)
	}
	w, err := db.Watch(ctx, "", revs[4])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, r := range revs[5:] {
		if ev := <-w.Events(); ev.Revision() != r {
			t.Fatalf("event at %d, want %d", ev.Revision(), r)
		}
	}
}
