package test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// tinyHistory are server flags that make background compaction keep only
// the last 5 revisions, dropping older ones within a fraction of a second.
var tinyHistory = []string{"--history-min-revisions", "5", "--history-min-age", "100ms", "--history-compaction-interval", "50ms"}

// TestHistoryCompactedGets410 writes past a tiny compaction window on the
// real server, waits for compaction, and checks that what points at the
// dropped history gets 410 Expired: a WebSocket watch and an HTTP watch from
// an old resourceVersion (an ERROR event with the Status, then the end of the
// stream) and a list with an old continue token; a watch from a recent
// resourceVersion still works.
func TestHistoryCompactedGets410(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: tinyHistory})
	w := wsSetupWidgets(t, s)

	old := w.create("h-a", "small", nil)
	w.create("h-b", "small", nil)
	w.create("h-c", "small", nil)
	var page struct {
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
	}
	code, body, err := s.Do("GET", wsWidgetsPath+"?limit=1", s.Token, nil)
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &page) != nil || page.Metadata.Continue == "" {
		t.Fatalf("first page: %d %.300s %v", code, body, err)
	}
	for i := range 20 {
		w.setSize("h-a", []string{"medium", "large"}[i%2])
	}

	// Compaction runs in the background: poll the continue token until its
	// revision is gone.
	next := wsWidgetsPath + "?limit=1&continue=" + url.QueryEscape(page.Metadata.Continue)
	testsupport.Eventually(t, 20*time.Second, "the continue token to stop working once its revision left the compaction window", func() bool {
		code, body, err = s.Do("GET", next, s.Token, nil)
		if err != nil {
			t.Fatal(err)
		}
		return code != http.StatusOK
	})
	t.Run("list with an old continue token", func(t *testing.T) {
		checkExpired(t, code, body)
	})

	t.Run("WebSocket watch from an old resourceVersion", func(t *testing.T) {
		c := wsMustWatch(t, s, url.Values{"resourceVersion": {old}})
		ev, err := readWSEvent(c, 10*time.Second)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		checkExpiredEvent(t, ev)
		_, err = readWSEvent(c, 10*time.Second)
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
			t.Fatalf("after the ERROR event: %v, want a normal close", err)
		}
	})

	t.Run("HTTP watch from an old resourceVersion", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", s.URL+wsWidgetsPath+"?watch=true&resourceVersion="+old, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		c := s.HTTPClient()
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("watch: %d %.300s, want 200 and an ERROR event", resp.StatusCode, b)
		}
		dec := json.NewDecoder(resp.Body)
		var ev wsEvent
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("read event: %v", err)
		}
		checkExpiredEvent(t, ev)
		if err := dec.Decode(&ev); err != io.EOF {
			t.Fatalf("after the ERROR event: %v (%s), want the end of the stream", err, ev)
		}
	})

	t.Run("watch from a recent resourceVersion", func(t *testing.T) {
		c := wsMustWatch(t, s, url.Values{"resourceVersion": {w.listRV()}})
		rv := w.setSize("h-b", "large")
		ev := wsNextObjectEvent(t, c)
		if ev.Type != "MODIFIED" || ev.Object.Metadata.Name != "h-b" || ev.Object.Metadata.ResourceVersion != rv {
			t.Fatalf("got %s, want MODIFIED h-b@%s", ev, rv)
		}
	})
}

// checkExpiredEvent fails t unless ev, a watch's first event, is an ERROR
// event with a 410 Expired Status.
func checkExpiredEvent(t *testing.T, ev wsEvent) {
	t.Helper()
	if ev.Type != "ERROR" || ev.Object.Kind != "Status" || ev.Object.Code != http.StatusGone || ev.Object.Reason != "Expired" {
		t.Fatalf("first event %s (%s %d %s), want ERROR with a 410 Expired Status", ev.Type, ev.Object.Kind, ev.Object.Code, ev.Object.Reason)
	}
}

// checkExpired fails t unless code and body are a 410 Expired Status.
func checkExpired(t *testing.T, code int, body []byte) {
	t.Helper()
	var st struct {
		Kind   string `json:"kind"`
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &st); err != nil || code != http.StatusGone || st.Kind != "Status" || st.Code != http.StatusGone || st.Reason != "Expired" {
		t.Fatalf("%d %.300s, want 410 with an Expired Status", code, body)
	}
}
