package wswatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// rekind returns a Conversion that swaps each object for one of kind with
// the same metadata, counting its calls.
func rekind(kind, format string, calls *atomic.Int64) wswatch.Conversion {
	return wswatch.Conversion{Format: format, Convert: func(ev watch.Event) (watch.Event, error) {
		calls.Add(1)
		if u, ok := ev.Object.(*unstructured.Unstructured); ok {
			ev.Object = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "meta.k8s.io/v1", "kind": kind, "metadata": u.Object["metadata"],
			}}
		}
		return ev, nil
	}}
}

// convHarness serves one watch per connection, converted as the "as" query
// parameter names, and hands each connection's watch to the test.
type convHarness struct {
	t       *testing.T
	srv     *httptest.Server
	watches chan *sinkWatch
}

func newConvHarness(t *testing.T, convs map[string]wswatch.Conversion) *convHarness {
	t.Helper()
	ws, err := wswatch.New(wswatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &convHarness{t: t, watches: make(chan *sinkWatch, 16)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := func(context.Context) (watch.Interface, error) {
			sw := newSinkWatch()
			h.watches <- sw
			return sw, nil
		}
		_ = ws.ServeConverted(w, r, start, convs[r.URL.Query().Get("as")])
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *convHarness) dial(as string) (*websocket.Conn, *sinkWatch) {
	h.t.Helper()
	u := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/apis/example.setpoint.dev/v1/widgets?watch=true&as=" + as
	c, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	select {
	case w := <-h.watches:
		return c, w
	case <-time.After(5 * time.Second):
		h.t.Fatal("the watch did not start")
		return nil, nil
	}
}

// TestConversionKeepsFormatsApart: each connection gets its events in its
// own format although all of them get the very same event objects, which
// the encode cache finds by pointer: a converted encoding never reaches a
// connection of another format or one that converts nothing. Connections of
// one named Format share each conversion; with Format "" every connection
// converts for itself.
func TestConversionKeepsFormatsApart(t *testing.T) {
	var metaCalls, ownCalls atomic.Int64
	h := newConvHarness(t, map[string]wswatch.Conversion{
		"meta": rekind("PartialObjectMetadata", "meta", &metaCalls),
		"own":  rekind("Own", "", &ownCalls),
	})
	formats := []string{"meta", "plain", "meta", "own", "plain", "own"}
	want := map[string]string{"meta": "PartialObjectMetadata", "plain": "Widget", "own": "Own"}
	conns := make([]*websocket.Conn, len(formats))
	watches := make([]*sinkWatch, len(formats))
	for i, f := range formats {
		conns[i], watches[i] = h.dial(f)
	}
	events := []watch.Event{
		{Type: watch.Added, Object: widget("a", 5, 0)},
		{Type: watch.Modified, Object: widget("a", 6, 0)},
		{Type: watch.Bookmark, Object: widget("", 7, 0)},
	}
	for _, ev := range events {
		// One connection after the other, so that each finds in the cache
		// what the ones before it encoded.
		for i, f := range formats {
			if !watches[i].send(ev, 5*time.Second) {
				t.Fatalf("%s: send refused", f)
			}
			got := readEvent(t, conns[i])
			var obj struct {
				Kind     string
				Metadata struct{ ResourceVersion string }
				Spec     map[string]any
			}
			if err := json.Unmarshal(got.Object, &obj); err != nil {
				t.Fatal(err)
			}
			if got.Type != string(ev.Type) || obj.Kind != want[f] || (obj.Spec != nil) != (f == "plain") {
				t.Fatalf("connection %d (%s) got %s %s, want %s %s", i, f, got.Type, got.Object, ev.Type, want[f])
			}
			if rv := ev.Object.(*unstructured.Unstructured).GetResourceVersion(); obj.Metadata.ResourceVersion != rv {
				t.Fatalf("connection %d (%s): resourceVersion %q, want %q", i, f, obj.Metadata.ResourceVersion, rv)
			}
		}
	}
	if n := metaCalls.Load(); n != int64(len(events)) {
		t.Errorf("the cached format converted %d times for %d events on 2 connections, want %d", n, len(events), len(events))
	}
	if n := ownCalls.Load(); n != 2*int64(len(events)) {
		t.Errorf("the uncached format converted %d times for %d events on 2 connections, want %d", n, len(events), 2*len(events))
	}
}

// TestConversionErrorEndsTheWatch: an event that cannot be converted ends
// the watch with an ERROR event that reports why, then 1000, as an event
// that cannot be encoded does.
func TestConversionErrorEndsTheWatch(t *testing.T) {
	h := newConvHarness(t, map[string]wswatch.Conversion{
		"fail": {Format: "fail", Convert: func(ev watch.Event) (watch.Event, error) {
			return ev, apierrors.NewBadRequest("cannot convert")
		}},
	})
	c, w := h.dial("fail")
	if w.send(watch.Event{Type: watch.Added, Object: widget("a", 5, 0)}, 5*time.Second) {
		t.Fatal("the session wants more events after a conversion error")
	}
	got := readEvent(t, c)
	var st struct {
		Kind    string
		Code    int
		Message string
	}
	_ = json.Unmarshal(got.Object, &st)
	if got.Type != "ERROR" || st.Kind != "Status" || st.Code != http.StatusBadRequest || st.Message != "cannot convert" {
		t.Fatalf("got %s %s, want an ERROR with the conversion's Status", got.Type, got.Object)
	}
	if code, _ := readClose(t, c); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d, want 1000", code)
	}
}
