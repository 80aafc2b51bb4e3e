package test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// The WebSocket suites watch Widgets (../shared/DESIGN.md) of a CRD that
// also has spec.note, a free string the slow-client test makes large.
var wsWidgetCRD = testsupport.CRD{Kind: "Widget", ShortNames: []string{"wd"}, Status: true, Columns: `[{"jsonPath":".spec.size","name":"Size","type":"string"},{"jsonPath":".status.state","name":"State","type":"string"},{"jsonPath":".metadata.creationTimestamp","name":"Age","type":"date"}]`, Schema: `{"properties":{"spec":{"properties":{"name":{"type":"string"},"note":{"type":"string"},"size":{"enum":["small","medium","large"],"type":"string"}},"required":["name","size"],"type":"object"},"status":{"properties":{"conditions":{"items":{"type":"object","x-kubernetes-preserve-unknown-fields":true},"type":"array"},"lastProvisioned":{"format":"date-time","type":"string"},"state":{"type":"string"}},"type":"object"}},"type":"object"}`}.String()

const wsWidgetsPath = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"

// wsProtocol is the plain JSON subprotocol the server selects.
const wsProtocol = "setpoint.watch.v1"

// wsWidgets drives the Widget API of one server over HTTPS.
type wsWidgets struct {
	t      testing.TB
	s      *testserver.Server
	client *http.Client
}

// wsSetupWidgets registers the Widget CRD and waits until the kind is served.
func wsSetupWidgets(t testing.TB, s *testserver.Server) *wsWidgets {
	t.Helper()
	code, body, err := s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, strings.NewReader(wsWidgetCRD))
	if err != nil || (code != http.StatusCreated && code != http.StatusConflict) {
		t.Fatalf("create the Widget CRD: %d %s %v", code, body, err)
	}
	testsupport.Poll(t, 15*time.Second, "widgets served", func() (bool, string) {
		code, body, err := s.Do("GET", wsWidgetsPath, s.Token, nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, body, err)
	})
	c := s.HTTPClient()
	t.Cleanup(c.CloseIdleConnections)
	return &wsWidgets{t: t, s: s, client: c}
}

type wsObjMeta struct {
	UID             string `json:"uid"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// call sends a request with the admin token and decodes the metadata of the
// object it returns.
func (w *wsWidgets) call(method, path, contentType string, body any) wsObjMeta {
	w.t.Helper()
	var rd io.Reader
	var opts testserver.DoOptions
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
		opts.Header = http.Header{"Content-Type": {contentType}}
	}
	code, b, err := w.s.DoWith(method, path, w.s.Token, rd, opts)
	if err != nil {
		w.t.Fatalf("%s %s: %d, %v", method, path, code, err)
	}
	var out struct {
		Metadata wsObjMeta `json:"metadata"`
	}
	var raw json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&raw); err != nil {
		w.t.Fatalf("%s %s: %d, decode: %v", method, path, code, err)
	}
	if code >= 300 {
		w.t.Fatalf("%s %s: %d %s", method, path, code, raw)
	}
	_ = json.Unmarshal(raw, &out)
	return out.Metadata
}

func (w *wsWidgets) create(name, size string, labels map[string]string) string {
	w.t.Helper()
	obj := map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"name": name, "size": size},
	}
	return w.call("POST", wsWidgetsPath, "application/json", obj).ResourceVersion
}

func (w *wsWidgets) setSize(name, size string) string {
	w.t.Helper()
	return w.call("PATCH", wsWidgetsPath+"/"+name, "application/merge-patch+json",
		map[string]any{"spec": map[string]any{"size": size}}).ResourceVersion
}

// setNoteRaw sets spec.note, for large notes: it builds the body and reads the
// resourceVersion from the head of the response without JSON codecs, which
// are slow on megabytes under the race detector.
func (w *wsWidgets) setNoteRaw(name, note string) string {
	w.t.Helper()
	body := `{"spec":{"note":"` + note + `"}}`
	req, err := http.NewRequest("PATCH", w.s.URL+wsWidgetsPath+"/"+name, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Authorization", "Bearer "+w.s.Token)
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatalf("PATCH %s: %v", name, err)
	}
	defer resp.Body.Close()
	head := make([]byte, 2048)
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, resp.Body)
	_, rest, ok := strings.Cut(string(head[:n]), `"resourceVersion":"`)
	rv, _, _ := strings.Cut(rest, `"`)
	if resp.StatusCode != http.StatusOK || !ok || rv == "" {
		w.t.Fatalf("PATCH %s: %d %.300s", name, resp.StatusCode, head[:n])
	}
	return rv
}

func (w *wsWidgets) remove(name string) {
	w.t.Helper()
	w.call("DELETE", wsWidgetsPath+"/"+name, "", nil)
}

// listRV lists the widgets and returns the list's resourceVersion.
func (w *wsWidgets) listRV() string {
	w.t.Helper()
	return w.call("GET", wsWidgetsPath, "", nil).ResourceVersion
}

func wsTokenProtocol(token string) string {
	return "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// wsEndpoint is what a WebSocket client needs of a server, copied once so
// that a client goroutine does not read the Server while it restarts.
type wsEndpoint struct {
	url   string
	pool  *x509.CertPool
	token string
}

func endpointOf(s *testserver.Server) wsEndpoint {
	return wsEndpoint{url: s.URL, pool: s.CAPool, token: s.Token}
}

// wsDial opens a WebSocket watch of path with query q.
func wsDial(s *testserver.Server, path string, q url.Values, h http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	return endpointOf(s).dial(path, q, h, protocols...)
}

func (e wsEndpoint) dial(path string, q url.Values, h http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{
		TLSClientConfig:  &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12},
		HandshakeTimeout: 10 * time.Second,
		Subprotocols:     protocols,
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("watch", "true")
	u := "wss" + strings.TrimPrefix(e.url, "https") + path + "?" + q.Encode()
	return d.Dial(u, h)
}

// wsMustWatch opens a watch as a browser would: the token as a subprotocol.
func wsMustWatch(t testing.TB, s *testserver.Server, q url.Values) *websocket.Conn {
	t.Helper()
	return wsMustWatchPath(t, s, wsWidgetsPath, q)
}

func wsMustWatchPath(t testing.TB, s *testserver.Server, path string, q url.Values) *websocket.Conn {
	t.Helper()
	c, resp, err := wsDial(s, path, q, nil, wsTokenProtocol(s.Token), wsProtocol)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial watch: %v (HTTP %d)", err, code)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type wsEvent struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string    `json:"kind"`
		Code     int       `json:"code"`
		Reason   string    `json:"reason"`
		Metadata wsObjMeta `json:"metadata"`
		Spec     struct {
			Size string `json:"size"`
		} `json:"spec"`
	} `json:"object"`
}

func (e wsEvent) String() string {
	return fmt.Sprintf("%s %s@%s", e.Type, e.Object.Metadata.Name, e.Object.Metadata.ResourceVersion)
}

func readWSEvent(c *websocket.Conn, d time.Duration) (wsEvent, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	typ, b, err := c.ReadMessage()
	if err != nil {
		return wsEvent{}, err
	}
	if typ != websocket.TextMessage {
		return wsEvent{}, fmt.Errorf("message type %d, want text", typ)
	}
	var ev wsEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return wsEvent{}, fmt.Errorf("decode %.200s: %w", b, err)
	}
	return ev, nil
}

// readRawEvent reads one event and returns its type and its object's
// resourceVersion, found in the head of the message (metadata comes before
// spec), without decoding megabytes of JSON.
func readRawEvent(c *websocket.Conn, d time.Duration) (string, string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, b, err := c.ReadMessage()
	if err != nil {
		return "", "", err
	}
	head := string(b[:min(len(b), 4096)])
	_, rest, _ := strings.Cut(head, `"type":"`)
	typ, _, _ := strings.Cut(rest, `"`)
	_, rest, _ = strings.Cut(head, `"resourceVersion":"`)
	rv, _, _ := strings.Cut(rest, `"`)
	return typ, rv, nil
}

// wsNextObjectEvent returns the next event that is not a bookmark.
func wsNextObjectEvent(t testing.TB, c *websocket.Conn) wsEvent {
	t.Helper()
	for {
		ev, err := readWSEvent(c, 10*time.Second)
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		if ev.Type != "BOOKMARK" {
			return ev
		}
	}
}

func wsExpectEvents(t testing.TB, c *websocket.Conn, want ...string) {
	t.Helper()
	for _, w := range want {
		ev := wsNextObjectEvent(t, c)
		if got := ev.Type + " " + ev.Object.Metadata.Name; got != w {
			t.Fatalf("got %s, want %s", ev, w)
		}
	}
}

func TestWebSocketWatch(t *testing.T) {
	s := testserver.Start(t, testserver.Options{LogLevel: "debug",
		Args: []string{"--allowed-origins", "https://app.example.com,http://127.0.0.1:3000", "--allowed-origins", "https://ui.example.com:8443"}})
	w := wsSetupWidgets(t, s)

	t.Run("auth", func(t *testing.T) {
		tests := []struct {
			name      string
			protocols []string
			header    http.Header
			want      int
		}{
			{name: "missing", protocols: []string{wsProtocol}, want: http.StatusUnauthorized},
			{name: "wrong", protocols: []string{wsTokenProtocol("not-the-token"), wsProtocol}, want: http.StatusUnauthorized},
			{name: "right prefix, extra suffix", protocols: []string{wsTokenProtocol(s.Token + "x"), wsProtocol}, want: http.StatusUnauthorized},
			{name: "right as subprotocol", protocols: []string{wsTokenProtocol(s.Token), wsProtocol}, want: http.StatusSwitchingProtocols},
			{name: "right as header", header: http.Header{"Authorization": {"Bearer " + s.Token}}, want: http.StatusSwitchingProtocols},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				c, resp, err := wsDial(s, wsWidgetsPath, nil, tc.header, tc.protocols...)
				if resp == nil {
					t.Fatalf("dial: %v", err)
				}
				if resp.StatusCode != tc.want {
					t.Fatalf("handshake %d (%v), want %d", resp.StatusCode, err, tc.want)
				}
				for k, vs := range resp.Header {
					if strings.Contains(strings.Join(vs, ","), "bearer") || strings.Contains(strings.Join(vs, ","), base64.RawURLEncoding.EncodeToString([]byte(s.Token))) {
						t.Fatalf("response header %s echoes the token: %v", k, vs)
					}
				}
				if c == nil {
					return
				}
				defer c.Close()
				if len(tc.protocols) > 0 && c.Subprotocol() != wsProtocol {
					t.Fatalf("subprotocol %q, want %q", c.Subprotocol(), wsProtocol)
				}
			})
		}
	})

	t.Run("origin", func(t *testing.T) {
		tests := []struct {
			name, origin string
			want         int
		}{
			{name: "same", origin: s.URL, want: http.StatusSwitchingProtocols},
			{name: "foreign", origin: "https://evil.example.org", want: http.StatusForbidden},
			{name: "same host over http", origin: "http" + strings.TrimPrefix(s.URL, "https"), want: http.StatusForbidden},
			// --allowed-origins, given comma-separated and repeated.
			{name: "allowed extra", origin: "https://app.example.com", want: http.StatusSwitchingProtocols},
			{name: "allowed extra, default port and case", origin: "https://APP.example.com:443", want: http.StatusSwitchingProtocols},
			{name: "allowed extra with port", origin: "http://127.0.0.1:3000", want: http.StatusSwitchingProtocols},
			{name: "allowed extra, repeated flag", origin: "https://ui.example.com:8443", want: http.StatusSwitchingProtocols},
			{name: "allowed host, other port", origin: "https://ui.example.com", want: http.StatusForbidden},
			{name: "allowed host, other scheme", origin: "http://app.example.com", want: http.StatusForbidden},
			{name: "subdomain of an allowed one", origin: "https://evil.app.example.com", want: http.StatusForbidden},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				c, resp, err := wsDial(s, wsWidgetsPath, nil, http.Header{"Origin": {tc.origin}}, wsTokenProtocol(s.Token), wsProtocol)
				if resp == nil {
					t.Fatalf("dial: %v", err)
				}
				if c != nil {
					c.Close()
				}
				if resp.StatusCode != tc.want {
					t.Fatalf("handshake %d (%v), want %d", resp.StatusCode, err, tc.want)
				}
			})
		}
	})

	t.Run("events, selectors and resume", func(t *testing.T) {
		rv := w.listRV()
		all := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}})
		dev := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}, "labelSelector": {"env=dev"}})
		byName := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}, "fieldSelector": {"metadata.name=ev-b"}})
		allNS := wsMustWatchPath(t, s, "/apis/example.setpoint.dev/v1/widgets", url.Values{"resourceVersion": {rv}})
		namespaces := wsMustWatchPath(t, s, "/api/v1/namespaces", url.Values{"resourceVersion": {rv}})

		w.create("ev-a", "small", map[string]string{"env": "dev"})
		w.create("ev-b", "small", map[string]string{"env": "prod"})
		w.setSize("ev-a", "large")
		w.remove("ev-a")
		w.call("POST", "/api/v1/namespaces", "application/json", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ws-ns"}})
		wsExpectEvents(t, all, "ADDED ev-a", "ADDED ev-b", "MODIFIED ev-a", "DELETED ev-a")
		wsExpectEvents(t, dev, "ADDED ev-a", "MODIFIED ev-a", "DELETED ev-a")
		wsExpectEvents(t, byName, "ADDED ev-b")
		wsExpectEvents(t, allNS, "ADDED ev-a", "ADDED ev-b", "MODIFIED ev-a", "DELETED ev-a")
		wsExpectEvents(t, namespaces, "ADDED ws-ns") // cluster-scoped

		// Resume: a new watch from ev-b's creation sees only what came after.
		afterB := w.setSize("ev-b", "medium")
		w.setSize("ev-b", "large")
		w.remove("ev-b")
		resumed := wsMustWatch(t, s, url.Values{"resourceVersion": {afterB}})
		ev := wsNextObjectEvent(t, resumed)
		if ev.Type != "MODIFIED" || ev.Object.Metadata.Name != "ev-b" || ev.Object.Spec.Size != "large" {
			t.Fatalf("first event after %s: %s size %s, want MODIFIED ev-b size large", afterB, ev, ev.Object.Spec.Size)
		}
		wsExpectEvents(t, resumed, "DELETED ev-b")
	})

	t.Run("bookmarks", func(t *testing.T) {
		t.Parallel()
		rv := w.create("bm-a", "small", nil)
		c := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}, "allowWatchBookmarks": {"true"}})
		n, _ := strconv.ParseInt(rv, 10, 64)
		deadline := time.Now().Add(40 * time.Second)
		for {
			ev, err := readWSEvent(c, time.Until(deadline))
			if err != nil {
				t.Fatalf("no bookmark within 40s: %v", err)
			}
			if ev.Type != "BOOKMARK" {
				continue
			}
			got, _ := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
			if got < n || ev.Object.Kind != "Widget" {
				t.Fatalf("bookmark %s at %d, want a Widget bookmark at %d or later", ev.Object.Kind, got, n)
			}
			return
		}
	})

	t.Run("slow client", func(t *testing.T) {
		// The client reads nothing while 12 MiB of events pile up: more than
		// the socket buffers and the per-connection queue (4 MiB) hold, and
		// soon enough that the server's blocked write does not time out.
		rv := w.create("slow", "small", nil)
		c := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}})
		note := strings.Repeat("n", 1<<20)
		var rvs []string
		t0 := time.Now()
		for i := 0; i < 12; i++ {
			rvs = append(rvs, w.setNoteRaw("slow", fmt.Sprintf("%02d%s", i, note)))
		}
		writes := time.Since(t0)
		last := rv
		got := 0
		for {
			typ, evRV, err := readRawEvent(c, 30*time.Second)
			if err != nil {
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != 4008 || !strings.Contains(ce.Text, "resourceVersion") {
					t.Fatalf("after %d events (writes took %v): %v, want close 4008 telling to resume from the last resourceVersion", got, writes, err)
				}
				break
			}
			if typ == "BOOKMARK" {
				continue
			}
			if got == len(rvs) || evRV != rvs[got] {
				t.Fatalf("event %d at %s, want %v: lost or reordered", got, evRV, rvs[got:])
			}
			last = rvs[got]
			got++
		}
		if got == len(rvs) {
			t.Fatal("every event arrived before the close: the client was not slow")
		}
		// Resuming from the last one received delivers the rest, once each.
		// The rest is several MiB, more than the per-connection queue: on a
		// loaded machine the resumed watch may be cut off as slow too, and
		// a client does what the close says, resumes again from the last
		// event it got (a few times at most).
		resumes := 0
		for next := got; next < len(rvs); {
			resumes++
			if resumes > 5 {
				t.Fatalf("resumed %d times and still at event %d of %d", resumes-1, next, len(rvs))
			}
			r := wsMustWatch(t, s, url.Values{"resourceVersion": {last}})
			for next < len(rvs) {
				typ, evRV, err := readRawEvent(r, 30*time.Second)
				var ce *websocket.CloseError
				if errors.As(err, &ce) && ce.Code == 4008 {
					break
				}
				if err != nil {
					t.Fatalf("resumed watch at event %d: %v", next, err)
				}
				if typ == "BOOKMARK" {
					continue
				}
				if evRV != rvs[next] {
					t.Fatalf("resumed event at %s, want %s: lost, repeated or reordered", evRV, rvs[next])
				}
				last = rvs[next]
				next++
			}
		}
		t.Logf("the slow client got %d of %d 1 MiB events before close 4008, and the rest after resuming %d time(s) (writes took %v)", got, len(rvs), resumes, writes)
	})

	t.Run("token never logged", func(t *testing.T) {
		enc := base64.RawURLEncoding.EncodeToString([]byte(s.Token))
		if logs := s.Logs(); strings.Contains(logs, s.Token) || strings.Contains(logs, enc) {
			t.Fatal("the server log holds the token")
		}
	})
}

// TestWebSocketWatchAcrossRestart runs a resuming watcher while the server
// restarts between writes: it must see every change exactly once, in order.
func TestWebSocketWatchAcrossRestart(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	w := wsSetupWidgets(t, s)
	start := w.listRV()

	type seen struct {
		mu     sync.Mutex
		events []wsEvent
		closes []int
		dials  int
	}
	var got seen
	ep := endpointOf(s)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := start
		backoff := 100 * time.Millisecond
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, _, err := ep.dial(wsWidgetsPath, url.Values{"resourceVersion": {rv}, "allowWatchBookmarks": {"true"}}, nil, wsTokenProtocol(ep.token), wsProtocol)
			if err != nil {
				select {
				case <-stop:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			got.mu.Lock()
			got.dials++
			got.mu.Unlock()
			go func() { <-stop; c.Close() }()
			for {
				ev, err := readWSEvent(c, time.Minute)
				if err != nil {
					var ce *websocket.CloseError
					got.mu.Lock()
					if errors.As(err, &ce) {
						got.closes = append(got.closes, ce.Code)
					} else {
						got.closes = append(got.closes, -1)
					}
					got.mu.Unlock()
					break
				}
				rv = ev.Object.Metadata.ResourceVersion
				if ev.Type == "BOOKMARK" {
					continue
				}
				got.mu.Lock()
				got.events = append(got.events, ev)
				got.mu.Unlock()
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	})

	// waitFor waits until the watcher has made dials connections and seen
	// events events.
	waitFor := func(dials, events int) {
		t.Helper()
		testsupport.Poll(t, 30*time.Second, fmt.Sprintf("%d connections and %d events", dials, events), func() (bool, string) {
			got.mu.Lock()
			d, n := got.dials, len(got.events)
			got.mu.Unlock()
			return d >= dials && n >= events, fmt.Sprintf("%d connections and %d events", d, n)
		})
	}

	var want []string
	waitFor(1, 0)
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("r%d", i)
		want = append(want, "ADDED "+name+"@"+w.create(name, "small", nil))
	}
	// Written before the watcher is back: it gets them by resuming.
	s.Restart()
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("r%d", i)
		want = append(want, "MODIFIED "+name+"@"+w.setSize(name, "large"))
	}
	waitFor(2, len(want))
	// Written once the watcher is back: it gets them live.
	s.Restart()
	waitFor(3, len(want))
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("r%d", i)
		want = append(want, "MODIFIED "+name+"@"+w.setSize(name, "medium"))
	}
	waitFor(3, len(want))
	// Give a duplicate, if any, time to arrive.
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done

	got.mu.Lock()
	defer got.mu.Unlock()
	var have []string
	for _, ev := range got.events {
		have = append(have, ev.String())
	}
	if strings.Join(have, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events across two restarts:\n%s\nwant, exactly once each:\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("%d events over %d connections; close codes seen: %v", len(have), got.dials, got.closes)
}
