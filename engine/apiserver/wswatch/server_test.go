package wswatch_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// chanWatch is a watch.Interface fed by the test; sends give up once the
// watch is stopped, so a test never blocks on a closed session.
type chanWatch struct {
	ch       chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func newChanWatch(size int) *chanWatch {
	return &chanWatch{ch: make(chan watch.Event, size), stop: make(chan struct{})}
}

func (w *chanWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *chanWatch) Stop()                          { w.stopOnce.Do(func() { close(w.stop) }) }

// send delivers ev unless the watch was stopped or d passed.
func (w *chanWatch) send(ev watch.Event, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case w.ch <- ev:
		return true
	case <-w.stop:
		return false
	case <-t.C:
		return false
	}
}

func (w *chanWatch) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// sinkWatch is a watch that hands its events to the function Deliver gives
// it, as the engine's watch does, instead of its result channel; the result
// channel only closes when the watch ends.
type sinkWatch struct {
	*chanWatch
	set   chan struct{} // closed by Deliver
	fn    func(watch.Event) bool
	endFn func()
}

func newSinkWatch() *sinkWatch {
	return &sinkWatch{chanWatch: newChanWatch(0), set: make(chan struct{})}
}

func (w *sinkWatch) Deliver(fn func(watch.Event) bool, end func()) {
	w.fn, w.endFn = fn, end
	close(w.set)
}

// end ends the watch as the engine's does: end, then the channel closes.
func (w *sinkWatch) end() {
	<-w.set
	w.endFn()
	close(w.ch)
}

// send calls the sink with ev, as the watch's goroutine would; false means
// the sink wants no more events.
func (w *sinkWatch) send(ev watch.Event, d time.Duration) bool {
	select {
	case <-w.set:
	default:
		select {
		case <-w.set:
		case <-time.After(d):
			return false
		}
	}
	return !w.stopped() && w.fn(ev)
}

// source is a test watch the test feeds with send and ends with end.
type source interface {
	watch.Interface
	send(ev watch.Event, d time.Duration) bool
	end()
	stopped() bool
}

func (w *chanWatch) end() { close(w.ch) }

// sources are the two ways a watch hands over its events: a result channel
// (drained by wswatch's pump) or a sink (the engine's watch).
var sources = []struct {
	name string
	new  func() source
}{
	{name: "channel", new: func() source { return newChanWatch(0) }},
	{name: "sink", new: func() source { return newSinkWatch() }},
}

func widget(name string, rv int, pad int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.setpoint.dev/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	u.SetResourceVersion(strconv.Itoa(rv))
	spec := map[string]any{"name": name, "size": "small"}
	if pad > 0 {
		spec["pad"] = strings.Repeat("x", pad)
	}
	u.Object["spec"] = spec
	return u
}

// harness is a test server whose handler serves one watch per connection.
type harness struct {
	t       *testing.T
	srv     *httptest.Server
	results chan error // Serve's result per connection
	start   wswatch.StartFunc
	cancel  context.CancelFunc // ends every request context: a shutdown
}

func newHarness(t *testing.T, opts wswatch.Options, start wswatch.StartFunc) *harness {
	t.Helper()
	ws, err := wswatch.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	shutdown, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, results: make(chan error, 16), start: start, cancel: cancel}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, stop := context.WithCancel(r.Context())
		defer stop()
		defer context.AfterFunc(shutdown, stop)()
		h.results <- ws.Serve(w, r.WithContext(ctx), h.start)
	}))
	t.Cleanup(func() {
		cancel()
		h.srv.Close()
	})
	return h
}

func (h *harness) url() string {
	return "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/apis/example.setpoint.dev/v1/widgets?watch=true"
}

func (h *harness) dial(header http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 5 * time.Second}
	return d.Dial(h.url(), header)
}

func (h *harness) mustDial(protocols ...string) *websocket.Conn {
	h.t.Helper()
	c, _, err := h.dial(nil, protocols...)
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

func (h *harness) result() error {
	h.t.Helper()
	select {
	case err := <-h.results:
		return err
	case <-time.After(5 * time.Second):
		h.t.Fatal("Serve did not return")
		return nil
	}
}

type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

func readEvent(t *testing.T, c *websocket.Conn) event {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("message type %d, want text", typ)
	}
	var ev event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return ev
}

// readClose reads until the close frame and returns its code.
func readClose(t *testing.T, c *websocket.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text
		}
		t.Fatalf("read: %v, want a close frame", err)
	}
}

func TestEventsHaveTheHTTPStreamShape(t *testing.T) {
	w := newChanWatch(8)
	h := newHarness(t, wswatch.Options{}, func(context.Context) (watch.Interface, error) { return w, nil })
	c := h.mustDial()

	sent := []watch.Event{
		{Type: watch.Added, Object: widget("a", 5, 0)},
		{Type: watch.Modified, Object: widget("a", 6, 0)},
		{Type: watch.Bookmark, Object: widget("", 7, 0)},
		{Type: watch.Deleted, Object: widget("a", 8, 0)},
	}
	for _, ev := range sent {
		w.ch <- ev
	}
	for _, want := range sent {
		got := readEvent(t, c)
		if got.Type != string(want.Type) {
			t.Fatalf("type %s, want %s", got.Type, want.Type)
		}
		wantObj, _ := json.Marshal(want.Object)
		var a, b any
		_ = json.Unmarshal(got.Object, &a)
		_ = json.Unmarshal(wantObj, &b)
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if string(ga) != string(gb) {
			t.Fatalf("object %s, want %s", ga, gb)
		}
	}
	close(w.ch)
	if code, _ := readClose(t, c); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d, want 1000", code)
	}
	if err := h.result(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestEncodeEventMatchesWatchEvent(t *testing.T) {
	st := apierrors.NewResourceExpired("too old resource version: 5 (9)").Status()
	b, err := wswatch.EncodeEvent(watch.Event{Type: watch.Error, Object: &st})
	if err != nil {
		t.Fatal(err)
	}
	var we metav1.WatchEvent
	if err := json.Unmarshal(b, &we); err != nil {
		t.Fatal(err)
	}
	var got metav1.Status
	if err := json.Unmarshal(we.Object.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if we.Type != "ERROR" || got.Code != 410 || got.Kind != "Status" || got.APIVersion != "v1" || got.Reason != metav1.StatusReasonExpired {
		t.Fatalf("got %s", b)
	}
}

func TestSubprotocols(t *testing.T) {
	token := "wswatch-secret-token"
	tokenProto := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(token))
	tests := []struct {
		name    string
		offered []string
		want    string
	}{
		{name: "token and plain", offered: []string{tokenProto, wswatch.Subprotocol}, want: wswatch.Subprotocol},
		{name: "plain first", offered: []string{wswatch.Subprotocol, tokenProto}, want: wswatch.Subprotocol},
		{name: "token only", offered: []string{tokenProto}, want: ""},
		{name: "kubernetes ones", offered: []string{"base64.binary.k8s.io", tokenProto}, want: ""},
		{name: "none", offered: nil, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newChanWatch(1)
			h := newHarness(t, wswatch.Options{}, func(context.Context) (watch.Interface, error) { return w, nil })
			c, resp, err := h.dial(nil, tc.offered...)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			if got := c.Subprotocol(); got != tc.want {
				t.Fatalf("subprotocol %q, want %q", got, tc.want)
			}
			for k, vs := range resp.Header {
				for _, v := range vs {
					if strings.Contains(v, token) || strings.Contains(v, "bearer") {
						t.Fatalf("response header %s: %s echoes the token", k, v)
					}
				}
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	if _, err := wswatch.New(wswatch.Options{AllowedOrigins: []string{"*"}}); !errors.Is(err, wswatch.ErrBadOrigin) {
		t.Fatalf("New with *: %v, want ErrBadOrigin", err)
	}
	if _, err := wswatch.New(wswatch.Options{AllowedOrigins: []string{"https://*.example.com"}}); !errors.Is(err, wswatch.ErrBadOrigin) {
		t.Fatalf("New with a wildcard host: %v, want ErrBadOrigin", err)
	}
	opts := wswatch.Options{AllowedOrigins: []string{"https://Console.Example.com:443"}}
	tests := []struct {
		name   string
		origin func(h *harness) string
		want   int
	}{
		{name: "none", origin: func(*harness) string { return "" }, want: http.StatusSwitchingProtocols},
		{name: "same", origin: func(h *harness) string { return h.srv.URL }, want: http.StatusSwitchingProtocols},
		{name: "allowed", origin: func(*harness) string { return "https://console.example.com" }, want: http.StatusSwitchingProtocols},
		{name: "allowed host other scheme", origin: func(*harness) string { return "http://console.example.com" }, want: http.StatusForbidden},
		{name: "foreign", origin: func(*harness) string { return "https://evil.example.org" }, want: http.StatusForbidden},
		{name: "same host other scheme", origin: func(h *harness) string { return "https" + strings.TrimPrefix(h.srv.URL, "http") }, want: http.StatusForbidden},
		{name: "null", origin: func(*harness) string { return "null" }, want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{}, 1)
			w := newChanWatch(1)
			h := newHarness(t, opts, func(context.Context) (watch.Interface, error) { started <- struct{}{}; return w, nil })
			hdr := http.Header{}
			if o := tc.origin(h); o != "" {
				hdr.Set("Origin", o)
			}
			c, resp, err := h.dial(hdr)
			if resp == nil {
				t.Fatalf("dial: %v", err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (%v)", resp.StatusCode, tc.want, err)
			}
			if c != nil {
				c.Close()
				return
			}
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Code != http.StatusForbidden || st.Kind != "Status" {
				t.Fatalf("body %+v (%v), want a 403 Status", st, err)
			}
			if err := h.result(); !errors.Is(err, wswatch.ErrOrigin) {
				t.Fatalf("Serve: %v, want ErrOrigin", err)
			}
			select {
			case <-started:
				t.Fatal("the watch was started for a refused origin")
			default:
			}
		})
	}
}

func TestStartErrorIsAnErrorEvent(t *testing.T) {
	h := newHarness(t, wswatch.Options{}, func(context.Context) (watch.Interface, error) {
		return nil, apierrors.NewResourceExpired("too old resource version: 3 (40)")
	})
	c := h.mustDial()
	ev := readEvent(t, c)
	var st metav1.Status
	if err := json.Unmarshal(ev.Object, &st); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "ERROR" || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("got %s %s, want ERROR 410 Expired", ev.Type, ev.Object)
	}
	if code, _ := readClose(t, c); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d, want 1000", code)
	}
	if err := h.result(); err == nil || !apierrors.IsResourceExpired(err) {
		t.Fatalf("Serve: %v, want the start error", err)
	}
}

func TestWatchContextEndsWithConnection(t *testing.T) {
	ctxs := make(chan context.Context, 1)
	w := newChanWatch(1)
	h := newHarness(t, wswatch.Options{}, func(ctx context.Context) (watch.Interface, error) { ctxs <- ctx; return w, nil })
	c := h.mustDial()
	ctx := <-ctxs
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	if err := h.result(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if ctx.Err() == nil || !w.stopped() {
		t.Fatalf("after the client left: ctx err %v, watch stopped %v; want both ended", ctx.Err(), w.stopped())
	}
}

func TestShutdownClosesGoingAway(t *testing.T) {
	w := newChanWatch(1)
	h := newHarness(t, wswatch.Options{}, func(context.Context) (watch.Interface, error) { return w, nil })
	c := h.mustDial()
	w.ch <- watch.Event{Type: watch.Added, Object: widget("a", 2, 0)}
	readEvent(t, c)
	h.cancel()
	if code, reason := readClose(t, c); code != websocket.CloseGoingAway || !strings.Contains(reason, "resourceVersion") {
		t.Fatalf("close %d %q, want 1001 telling to resume", code, reason)
	}
	if err := h.result(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestSlowClientIsClosedTooSlow(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) { testSlowClient(t, src.new()) })
	}
}

func testSlowClient(t *testing.T, w source) {
	h := newHarness(t, wswatch.Options{MaxQueuedEvents: 16, MaxQueuedBytes: 1 << 20}, func(context.Context) (watch.Interface, error) { return w, nil })
	c := h.mustDial()

	// The client reads nothing while the server sends 32 KiB events until
	// the socket buffers and the queue fill and the pump stops taking them
	// (a pause of 2 s, not less: on a loaded machine the server's goroutines
	// can wait that long for a core without having stopped).
	sent := 0
	for ; sent < 5000; sent++ {
		if !w.send(watch.Event{Type: watch.Added, Object: widget("w"+strconv.Itoa(sent), sent+1, 32<<10)}, 2*time.Second) {
			break
		}
	}
	if sent == 5000 {
		t.Fatal("the server kept taking events from a client that reads nothing")
	}
	// The client now reads: events in order, then the documented close.
	last := 0
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != wswatch.CloseTooSlow || !strings.Contains(ce.Text, "resume") {
				t.Fatalf("after %d events: %v, want close %d telling to resume", last, err, wswatch.CloseTooSlow)
			}
			break
		}
		var ev struct {
			Object struct {
				Metadata struct{ ResourceVersion string } `json:"metadata"`
			} `json:"object"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.Atoi(ev.Object.Metadata.ResourceVersion)
		if rv != last+1 {
			t.Fatalf("resourceVersion %d after %d: events lost or reordered before the close", rv, last)
		}
		last = rv
	}
	if last == 0 || last >= sent {
		t.Fatalf("client got %d of %d events; want some, and fewer than were sent", last, sent)
	}
	if err := h.result(); !errors.Is(err, wswatch.ErrTooSlow) {
		t.Fatalf("Serve: %v, want ErrTooSlow", err)
	}
	t.Logf("server sent %d events of 32 KiB; client got %d before close %d", sent, last, wswatch.CloseTooSlow)
}

func TestSilentClientIsDropped(t *testing.T) {
	w := newChanWatch(1)
	// The pong timeout leaves a loaded machine (tests run with -race beside
	// other packages) time to schedule the live client's reader.
	h := newHarness(t, wswatch.Options{PingInterval: 100 * time.Millisecond, PongTimeout: 400 * time.Millisecond},
		func(context.Context) (watch.Interface, error) { return w, nil })

	// A client that reads answers pings and stays.
	live := h.mustDial()
	go func() {
		for {
			if _, _, err := live.ReadMessage(); err != nil {
				return
			}
		}
	}()
	// A client that never reads never answers a ping.
	silent := h.mustDial()
	_ = silent
	start := time.Now()
	if err := h.result(); err == nil {
		t.Log("silent client dropped")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("silent client dropped after %v", d)
	}
	select {
	case err := <-h.results:
		t.Fatalf("the live client was dropped too: %v", err)
	case <-time.After(1200 * time.Millisecond): // three pong timeouts
	}
}

func TestRequestTimeoutClosesNormally(t *testing.T) {
	ws, err := wswatch.New(wswatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newChanWatch(1)
	results := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 200*time.Millisecond)
		defer cancel()
		results <- ws.Serve(rw, r.WithContext(ctx), func(context.Context) (watch.Interface, error) { return w, nil })
	}))
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if code, _ := readClose(t, c); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d after the request timed out, want 1000", code)
	}
	if err := <-results; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestBurstArrivesWholeAndInOrder sends a burst three times the queue's
// bound in events (the initial events of a large list, a replayed backlog)
// to a client that reads promptly: the writer must keep up rather than wait
// out WriteInterval, and the client gets every event, in order.
func TestBurstArrivesWholeAndInOrder(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			w := src.new()
			h := newHarness(t, wswatch.Options{}, func(context.Context) (watch.Interface, error) { return w, nil })
			c := h.mustDial()
			const n = 3 * 1024 // MaxQueuedEvents is 1024 by default
			go func() {
				for i := 1; i <= n; i++ {
					if !w.send(watch.Event{Type: watch.Modified, Object: widget("w"+strconv.Itoa(i%7), i, i%300)}, 5*time.Second) {
						return
					}
				}
				w.end()
			}()
			for i := 1; i <= n; i++ {
				ev := readEvent(t, c)
				var o unstructured.Unstructured
				if err := o.UnmarshalJSON(ev.Object); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if o.GetResourceVersion() != strconv.Itoa(i) {
					t.Fatalf("event %d has resourceVersion %s", i, o.GetResourceVersion())
				}
			}
			if code, _ := readClose(t, c); code != websocket.CloseNormalClosure {
				t.Fatalf("close code %d, want 1000", code)
			}
		})
	}
}

func TestReadLimit(t *testing.T) {
	w := newChanWatch(1)
	h := newHarness(t, wswatch.Options{ReadLimit: 1024}, func(context.Context) (watch.Interface, error) { return w, nil })
	c := h.mustDial()
	// Small client messages are read and ignored; the watch goes on. A
	// ping with the largest payload a control frame carries is answered.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"hello":"server"}`)); err != nil {
		t.Fatal(err)
	}
	ping := strings.Repeat("p", 125)
	pong := make(chan string, 1)
	c.SetPongHandler(func(data string) error { pong <- data; return nil })
	if err := c.WriteControl(websocket.PingMessage, []byte(ping), time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The client handles the pong while it reads events.
	deadline := time.Now().Add(5 * time.Second)
	for rv := 2; ; rv++ {
		w.ch <- watch.Event{Type: watch.Added, Object: widget("a", rv, 0)}
		if ev := readEvent(t, c); ev.Type != "ADDED" {
			t.Fatalf("got %s, want ADDED", ev.Type)
		}
		select {
		case got := <-pong:
			if got != ping {
				t.Fatalf("pong %q, want the ping's payload", got)
			}
		default:
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("no pong for a 125-byte ping")
		}
		break
	}
	// A message over the limit ends the connection with 1009.
	if err := c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 4096))); err != nil {
		t.Fatal(err)
	}
	if code, _ := readClose(t, c); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d, want 1009", code)
	}
	if err := h.result(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestOpenOutlivesHandler opens connections with Open, whose handler
// returns at once: events still flow, the watch gets the connection's
// context, not the request's (which the HTTP server cancels when the
// handler returns), and the end of that context closes the connection with
// 1001 and calls done, once the watch has stopped.
func TestOpenOutlivesHandler(t *testing.T) {
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			ws, err := wswatch.New(wswatch.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := src.new()
			shutdown, stop := context.WithCancel(context.Background())
			defer stop()
			returned := make(chan struct{})
			done := make(chan error, 1)
			var watchCtx context.Context
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				defer close(returned)
				start := func(ctx context.Context) (watch.Interface, error) { watchCtx = ctx; return w, nil }
				if err := ws.Open(shutdown, rw, r, start, wswatch.Conversion{}, func(err error) { done <- err }); err != nil {
					t.Errorf("Open: %v", err)
				}
			}))
			defer srv.Close()
			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler did not return after the upgrade")
			}
			if !w.send(watch.Event{Type: watch.Added, Object: widget("a", 2, 0)}, 5*time.Second) {
				t.Fatal("the watch was stopped when the handler returned")
			}
			if ev := readEvent(t, c); ev.Type != "ADDED" {
				t.Fatalf("got %s, want ADDED", ev.Type)
			}
			if watchCtx.Err() != nil {
				t.Fatalf("the watch's context ended with the handler: %v", watchCtx.Err())
			}
			select {
			case err := <-done:
				t.Fatalf("done called while the connection is open: %v", err)
			default:
			}
			stop()
			if code, _ := readClose(t, c); code != websocket.CloseGoingAway {
				t.Fatalf("close code %d, want 1001", code)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("done: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("done not called after the close")
			}
			if watchCtx.Err() == nil || !w.stopped() {
				t.Fatalf("after done: ctx err %v, watch stopped %v; want both ended", watchCtx.Err(), w.stopped())
			}
		})
	}
}
