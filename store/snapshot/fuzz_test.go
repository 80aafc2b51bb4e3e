package snapshot_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/snapshot"
)

// FuzzVerify feeds Verify arbitrary files: it must never panic, and any
// file it accepts must read back as the records it counted.
func FuzzVerify(f *testing.F) {
	var good bytes.Buffer
	w, err := snapshot.NewWriter(&good, snapshot.Header{Revision: 5, Time: time.Unix(0, 0), Keys: 2,
		Counts: map[string]int64{"core/namespaces": 2}})
	if err != nil {
		f.Fatal(err)
	}
	for _, kv := range []store.KeyValue{
		{Key: "/core/namespaces/a", Value: []byte(`{}`), CreateRevision: 2, ModRevision: 3},
		{Key: "/core/namespaces/b", Value: []byte(`{"x":1}`), CreateRevision: 4, ModRevision: 5},
	} {
		if err := w.Write(&kv); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:40])
	f.Add([]byte("SETPOINT-SNAPSHOT\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hdr, sum, err := snapshot.Verify(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) && !errors.Is(err, snapshot.ErrVersion) {
				t.Fatalf("Verify: %v, want ErrCorrupt or ErrVersion", err)
			}
			return
		}
		var n int64
		for _, c := range hdr.Counts {
			n += c
		}
		if n != hdr.Keys || len(sum) != 64 {
			t.Fatalf("accepted a file with %d keys counted, header %d, sum %q", n, hdr.Keys, sum)
		}
	})
}
