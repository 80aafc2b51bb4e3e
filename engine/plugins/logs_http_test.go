package plugins

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
)

// droppingFlusher stands for the request instrumentation's wrapper: its
// Flush drops the error of the flush under it.
type droppingFlusher struct{ http.ResponseWriter }

func (d droppingFlusher) Flush() { _ = http.NewResponseController(d.ResponseWriter).Flush() }

func (d droppingFlusher) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// TestLogFollowEndsForSlowClient: a follow whose client stops reading ends
// once a batch of lines misses the write timeout, as a watch does, behind
// a wrapper whose Flush drops errors, rather than holding the stream (and
// its goroutine) until the client goes.
func TestLogFollowEndsForSlowClient(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := engine.New(ctx, engine.Options{Store: openTestDB(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if err := EnsureKind(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitServed(t, svc)
	plugin := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "chatty"},
		"spec":     map[string]any{"module": map[string]any{"digest": digestOf([]byte("m"))}},
	}}
	if _, err := svc.Create(ctx, Resource, plugin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs, _ := NewLogs(LogOptions{Rate: 1e9, Burst: 1e9}, nil)
	h := &logServer{logs: logs, svc: svc, writeTimeout: 300 * time.Millisecond}
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		h.ServeHTTP(droppingFlusher{w}, r)
	}))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	fmt.Fprintf(conn, "GET %s/chatty/log?follow=true HTTP/1.1\r\nHost: x\r\n\r\n", PluginsPath)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("status line %q, err %v", status, err)
	}
	// The client reads no more; the plugin goes on logging.
	line := strings.Repeat("x", 4000)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ended:
				return
			default:
			}
			logs.Add("chatty", LogLine{Message: line})
			time.Sleep(time.Millisecond)
		}
	}()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the follow of a client that stopped reading is still open 20 s on, with a write timeout of 300 ms")
	}
}
