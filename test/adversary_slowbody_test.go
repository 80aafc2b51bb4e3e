package test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestSlowBodyHasTheRequestTimeout sends the built server, over HTTP/1.1,
// a create whose body arrives a byte every 300 ms. The request timeout
// (--request-timeout) bounds "a request other than a watch", but it ended
// the handler's context, which a body read does not watch: the request
// held its in-flight seat for as long as the body kept coming (40 s for a
// 4 s timeout). It must end at the timeout, with 504 or a cut connection.
func TestSlowBodyHasTheRequestTimeout(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--request-timeout", "2s"}})
	conn, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: s.CAPool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"metadata":{"name":"slow"},"data":{"k":"` + strings.Repeat("x", 200) + `"}}`
	fmt.Fprintf(conn, "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", s.Addr, s.Token, len(body))
	start := time.Now()
	answered := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- "connection cut: " + err.Error()
			return
		}
		resp.Body.Close()
		answered <- resp.Status
	}()
	for i := 0; i < len(body); i++ {
		select {
		case a := <-answered:
			if d := time.Since(start); d > 6*time.Second {
				t.Fatalf("answered %q after %v, past the 2 s request timeout", a, d)
			}
			t.Logf("answered %q after %v", a, time.Since(start))
			if !strings.HasPrefix(a, "504") && !strings.HasPrefix(a, "connection cut") {
				t.Fatalf("answered %q, want 504 or a cut connection", a)
			}
			return
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			if d := time.Since(start); d > 6*time.Second {
				t.Fatalf("connection cut after %v, past the 2 s request timeout", d)
			}
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the body still trickles in 10 s after a create with a 2 s request timeout began")
		}
	}
	t.Fatal("the whole body went in")
}
