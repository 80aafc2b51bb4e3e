package wswatch

import (
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func obj(apiVersion, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	u.SetResourceVersion(rv)
	u.Object["spec"] = map[string]any{"size": "small"}
	return u
}

// encodeCase is one event given to an encodeCache, and how many times the
// cache must call the encoder for it.
type encodeCase struct {
	name      string
	ev        watch.Event
	wantCalls int
}

// runEncodeCases encodes each case's event through c, in order, and checks
// the bytes against EncodeEvent's and the number of encoder calls.
func runEncodeCases(t *testing.T, c *encodeCache, tests []encodeCase) {
	t.Helper()
	calls := 0
	enc := func(ev watch.Event) ([]byte, error) { calls++; return EncodeEvent(ev) }
	for _, tc := range tests {
		before := calls
		b, err := c.encode(tc.ev, enc)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := EncodeEvent(tc.ev)
		if string(b) != string(want) {
			t.Fatalf("%s: got %s, want %s", tc.name, b, want)
		}
		if got := calls - before; got != tc.wantCalls {
			t.Fatalf("%s: %d encodings, want %d", tc.name, got, tc.wantCalls)
		}
	}
}

func TestEncodeCache(t *testing.T) {
	c := newEncodeCache(2, 1<<20)
	st := metav1.Status{Code: 410}
	bookmarkEnd := obj("example.setpoint.dev/v1", "", "9")
	bookmarkEnd.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
	tests := []encodeCase{
		{name: "first", ev: watch.Event{Type: watch.Added, Object: obj("example.setpoint.dev/v1", "a", "5")}, wantCalls: 1},
		{name: "same event", ev: watch.Event{Type: watch.Added, Object: obj("example.setpoint.dev/v1", "a", "5")}, wantCalls: 0},
		{name: "other type", ev: watch.Event{Type: watch.Deleted, Object: obj("example.setpoint.dev/v1", "a", "5")}, wantCalls: 1},
		{name: "other version", ev: watch.Event{Type: watch.Added, Object: obj("example.setpoint.dev/v2", "a", "5")}, wantCalls: 1},
		{name: "evicted", ev: watch.Event{Type: watch.Added, Object: obj("example.setpoint.dev/v1", "a", "5")}, wantCalls: 1},
		{name: "error", ev: watch.Event{Type: watch.Error, Object: &st}, wantCalls: 1},
		{name: "error again", ev: watch.Event{Type: watch.Error, Object: &st}, wantCalls: 1},
		{name: "end bookmark", ev: watch.Event{Type: watch.Bookmark, Object: bookmarkEnd}, wantCalls: 1},
		{name: "end bookmark again", ev: watch.Event{Type: watch.Bookmark, Object: bookmarkEnd}, wantCalls: 1},
	}
	runEncodeCases(t, c, tests)
}

// TestEncodeCacheSharedObject checks the lookup by object pointer: a shared
// object is found again without encoding, under each event type apart, and
// its entry is evicted like the others.
func TestEncodeCacheSharedObject(t *testing.T) {
	c := newEncodeCache(2, 1<<20)
	shared := obj("example.setpoint.dev/v1", "a", "5")
	tests := []encodeCase{
		{name: "first", ev: watch.Event{Type: watch.Modified, Object: shared}, wantCalls: 1},
		{name: "same object", ev: watch.Event{Type: watch.Modified, Object: shared}, wantCalls: 0},
		{name: "same object, other type", ev: watch.Event{Type: watch.Added, Object: shared}, wantCalls: 1},
		{name: "equal copy", ev: watch.Event{Type: watch.Modified, Object: shared.DeepCopy()}, wantCalls: 0},
		{name: "others", ev: watch.Event{Type: watch.Modified, Object: obj("example.setpoint.dev/v1", "b", "6")}, wantCalls: 1},
		{name: "others 2", ev: watch.Event{Type: watch.Modified, Object: obj("example.setpoint.dev/v1", "c", "7")}, wantCalls: 1},
		{name: "evicted", ev: watch.Event{Type: watch.Modified, Object: shared}, wantCalls: 1},
	}
	runEncodeCases(t, c, tests)
	if len(c.byObj.m) > 2 || len(c.m.m) > 2 {
		t.Fatalf("cache holds %d entries by object and %d by key, want at most 2 each", len(c.byObj.m), len(c.m.m))
	}
}

func BenchmarkEncodeFanOut(b *testing.B) {
	const watchers = 1000
	b.Run("shared", func(b *testing.B) {
		// One event delivered to 1,000 watchers that share the decoded
		// object, as the engine's decode cache hands it out.
		c := newEncodeCache(4096, 64<<20)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ev := watch.Event{Type: watch.Modified, Object: obj("example.setpoint.dev/v1", "a", strconv.Itoa(i))}
			for w := 0; w < watchers; w++ {
				if _, err := c.encode(ev, EncodeEvent); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, cached := range []bool{false, true} {
		b.Run("cached="+strconv.FormatBool(cached), func(b *testing.B) {
			c := newEncodeCache(4096, 64<<20)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				// One event delivered to 1,000 watchers, each with its own
				// decoded copy, as the engine hands them out.
				for w := 0; w < watchers; w++ {
					ev := watch.Event{Type: watch.Modified, Object: obj("example.setpoint.dev/v1", "a", strconv.Itoa(i))}
					var err error
					if cached {
						_, err = c.encode(ev, EncodeEvent)
					} else {
						_, err = EncodeEvent(ev)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestEncodeCacheBytesBound checks that the cache keeps at most its byte
// bound of encoded events, evicting the oldest, and never keeps an event
// larger than the bound: a kind of large objects must not make it hold
// thousands of them.
func TestEncodeCacheBytesBound(t *testing.T) {
	c := newEncodeCache(100, 100)
	enc := func(n int) func(watch.Event) ([]byte, error) {
		return func(watch.Event) ([]byte, error) { return make([]byte, n), nil }
	}
	for i := range 5 {
		if _, err := c.encode(watch.Event{Type: watch.Modified, Object: obj("example.setpoint.dev/v1", fmt.Sprint("o", i), fmt.Sprint(10+i))}, enc(40)); err != nil {
			t.Fatal(err)
		}
		if c.m.bytes > 100 || c.byObj.bytes > 100 {
			t.Fatalf("after %d events of 40 bytes the cache holds %d and %d bytes, want at most 100", i+1, c.m.bytes, c.byObj.bytes)
		}
	}
	if len(c.m.m) != 2 {
		t.Errorf("cache holds %d events of 40 bytes under a 100-byte bound, want 2", len(c.m.m))
	}
	big := obj("example.setpoint.dev/v1", "big", "99")
	calls := 0
	for range 2 {
		_, _ = c.encode(watch.Event{Type: watch.Modified, Object: big}, func(watch.Event) ([]byte, error) { calls++; return make([]byte, 200), nil })
	}
	if calls != 2 {
		t.Errorf("an event larger than the bound was encoded %d times for 2 sends, want 2 (not kept)", calls)
	}
}
