package test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestWebSocketWatchSlotsAndShutdown checks the WebSocket watches of a real
// server, whose handlers return once the connection is upgraded: each keeps
// its watch slot (--max-watches) and counts as in flight until its client
// leaves, both go back to zero then, and stopping the server closes the
// watches still open with 1001 and exits cleanly.
func TestWebSocketWatchSlotsAndShutdown(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--max-watches", "2"}})
	wsSetupWidgets(t, s)
	// inflight is the in-flight gauge less the request that reads it.
	inflight := func() (float64, string) {
		code, body, err := s.Do("GET", "/metrics", s.Token, nil)
		if err != nil || code != http.StatusOK {
			return -1, fmt.Sprintf("/metrics: %d %v", code, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "setpoint_apiserver_inflight_requests "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return -1, line
				}
				return f - 1, line
			}
		}
		return -1, "no setpoint_apiserver_inflight_requests in /metrics"
	}
	waitInflight := func(want float64) {
		t.Helper()
		testsupport.Poll(t, 15*time.Second, fmt.Sprintf("%v requests in flight", want), func() (bool, string) {
			n, state := inflight()
			return n == want, state
		})
	}
	// The limits apply to a user outside system:masters.
	limited := limitedHeader(t, s)
	// tooMany tells whether one more watch is refused for want of a slot.
	tooMany := func() bool {
		c, resp, err := wsDial(s, wsWidgetsPath, nil, limited, wsTokenProtocol(s.Token), wsProtocol)
		if err == nil {
			c.Close()
			return false
		}
		return resp != nil && resp.StatusCode == http.StatusTooManyRequests
	}

	watch := func() *websocket.Conn {
		t.Helper()
		c, resp, err := wsDial(s, wsWidgetsPath, nil, limited, wsTokenProtocol(s.Token), wsProtocol)
		if err != nil {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Fatalf("dial watch as %s: %v (HTTP %d)", limitedUser, err, code)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := watch()
	b := watch()
	waitInflight(2)
	if !tooMany() {
		t.Fatal("a third watch got a slot while two are open with --max-watches 2")
	}
	a.Close()
	b.Close()
	// Their slots and in-flight counts go when the server sees them leave.
	waitInflight(0)

	c := wsMustWatch(t, s, nil)
	d := wsMustWatch(t, s, nil)
	waitInflight(2)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	for _, conn := range []*websocket.Conn{c, d} {
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		var err error
		for err == nil {
			_, _, err = conn.ReadMessage()
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("read while the server stops: %v, want close 1001", err)
		}
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("the server did not stop")
	}
}
