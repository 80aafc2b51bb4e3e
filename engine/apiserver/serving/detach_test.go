package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestDetachedWatchUntilShutdown opens a WebSocket watch whose handler
// detaches the connection and returns: the request keeps its watch slot,
// its in-flight count and its audit completion until Shutdown ends the
// connection, then gives all three back; after Shutdown, requests are no
// longer detached.
func TestDetachedWatchUntilShutdown(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n", out, 0, nil)
	m := NewMetrics()
	d := &Detached{}
	returned := make(chan struct{}, 4)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		ctx, end, ok := Detach(r.Context())
		if !ok {
			WriteStatus(w, http.StatusConflict, "Conflict", "not detached")
			return
		}
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			end()
			return
		}
		go func() {
			<-ctx.Done()
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "bye"), time.Now().Add(5*time.Second))
			_ = c.Close()
			end()
		}()
	})
	srv := httptest.NewServer(NewHandler(HandlerOptions{API: api, Token: testToken, Audit: a, Metrics: m, Detached: d,
		Authenticators: []authenticator.Token{limitedUser}, Authorizer: allowAll,
		Limits: LimitOptions{MaxWatches: 1}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets?watch=true"
	header := http.Header{"Authorization": {"Bearer " + limitedToken}} // the admin's watches are not limited

	c, _, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-returned
	if n := d.Open(); n != 1 {
		t.Fatalf("%d detached, want 1", n)
	}
	// The handler returned, and the watch still holds the one slot.
	if _, resp, err := websocket.DefaultDialer.Dial(url, header); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second watch: %v %v, want 429 while the first is open", err, resp)
	}
	testsupport.Poll(t, 10*time.Second, "one request in flight", func() (bool, string) {
		v := testutil.ToFloat64(m.inflight)
		return v == 1, fmt.Sprintf("%v in flight", v)
	})
	// The watch's events, then the refused one's, whole: the open watch
	// is not complete.
	testsupport.Poll(t, 10*time.Second, "audit events", func() (bool, string) {
		got := stages(t, out)
		return got == "RequestReceived ResponseStarted RequestReceived ResponseStarted ResponseComplete", got
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ce *websocket.CloseError
	if _, _, err := c.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("read after Shutdown: %v, want close 1001", err)
	}
	if n := d.Open(); n != 0 {
		t.Fatalf("%d detached after Shutdown, want 0", n)
	}
	if v := testutil.ToFloat64(m.inflight); v != 0 {
		t.Fatalf("%v requests in flight after Shutdown, want 0", v)
	}
	testsupport.Poll(t, 10*time.Second, "the watch's ResponseComplete", func() (bool, string) {
		got := stages(t, out)
		return strings.HasSuffix(got, "ResponseComplete ResponseComplete"), got
	})
	evs := out.events(t)
	if last := evs[len(evs)-1]; last.Verb != "watch" || last.ResponseStatus == nil || last.ResponseStatus.Code != http.StatusSwitchingProtocols {
		t.Fatalf("watch's ResponseComplete: verb %s status %+v, want watch 101", last.Verb, last.ResponseStatus)
	}

	// The slot is free again (not 429), and requests are no longer
	// detached (409 from the handler).
	if _, resp, err := websocket.DefaultDialer.Dial(url, header); err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("watch after Shutdown: %v %v, want the handler's 409", err, resp)
	}
}

// stages lists the audit events' stages in order.
func stages(t *testing.T, out *auditLog) string {
	t.Helper()
	var s []string
	for _, ev := range out.events(t) {
		s = append(s, string(ev.Stage))
	}
	return strings.Join(s, " ")
}
