package badger

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/store"
)

func FuzzDecodeRecord(f *testing.F) {
	evs := []store.Event{
		{Type: store.Added, Object: store.KeyValue{Key: "/g/r/a", Value: []byte(`{}`), CreateRevision: 5, ModRevision: 5}},
		{Type: store.Deleted, Object: store.KeyValue{Key: "/g/r/b", Value: []byte(`{"x":1}`), CreateRevision: 2, ModRevision: 6}},
	}
	var rec []byte
	for i := range evs {
		rec = appendRecordEvent(rec, &evs[i])
	}
	f.Add(rec, int64(6))
	f.Add([]byte{1, 0, 0, 0}, int64(1))
	f.Fuzz(func(t *testing.T, b []byte, last int64) {
		out, err := decodeRecord(b, last)
		if err != nil {
			return
		}
		var again []byte
		for i, re := range out {
			if re.rev != last-int64(len(out))+1+int64(i) {
				t.Fatalf("event %d at revision %d", i, re.rev)
			}
			ev := store.Event{Type: re.typ, Object: store.KeyValue{Key: re.key, Value: re.value, CreateRevision: re.createRev}}
			again = appendRecordEvent(again, &ev)
		}
		back, err := decodeRecord(again, last)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if d := cmp.Diff(out, back, cmp.AllowUnexported(recordEvent{})); d != "" && len(out)+len(back) > 0 {
			t.Fatalf("round trip (-first +second):\n%s", d)
		}
	})
}

func TestRecordRoundTrip(t *testing.T) {
	evs := []store.Event{
		{Type: store.Added, Object: store.KeyValue{Key: "/g/r/a", Value: []byte(`{"a":1}`), CreateRevision: 10, ModRevision: 10}},
		{Type: store.Modified, Object: store.KeyValue{Key: "/g/r/a", Value: []byte(`{"a":2}`), CreateRevision: 10, ModRevision: 11}},
		{Type: store.Deleted, Object: store.KeyValue{Key: "/g/r/a", Value: []byte(`{"a":2}`), CreateRevision: 10, ModRevision: 12}},
	}
	var rec []byte
	for i := range evs {
		rec = appendRecordEvent(rec, &evs[i])
	}
	got, err := decodeRecord(rec, 12)
	if err != nil {
		t.Fatal(err)
	}
	want := []recordEvent{
		{typ: store.Added, rev: 10, createRev: 10, key: "/g/r/a", value: []byte(`{"a":1}`)},
		{typ: store.Modified, rev: 11, createRev: 10, key: "/g/r/a", value: []byte(`{"a":2}`)},
		{typ: store.Deleted, rev: 12, createRev: 10, key: "/g/r/a", value: []byte{}},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(recordEvent{})); d != "" {
		t.Errorf("decoded (-want +got):\n%s", d)
	}
}
