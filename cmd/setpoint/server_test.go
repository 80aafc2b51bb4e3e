package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
)

func TestServerURL(t *testing.T) {
	for _, tt := range []struct{ listen, want string }{
		{"127.0.0.1:0", "https://127.0.0.1:"},
		{"[::1]:0", "https://[::1]:"},
		{"0.0.0.0:0", "https://127.0.0.1:"},
		{":0", "https://127.0.0.1:"},
		{"[::]:0", "https://[::1]:"},
		{"localhost:0", "https://localhost:"},
	} {
		ln, err := net.Listen("tcp", tt.listen)
		if err != nil {
			t.Skipf("listen %s: %v", tt.listen, err)
		}
		host, _, _ := net.SplitHostPort(tt.listen)
		got := serverURL(host, ln)
		ln.Close()
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("serverURL(%s) = %s, want %s...", tt.listen, got, tt.want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(&b, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"msg":"shown"`) {
		t.Errorf("log: %s", b.String())
	}
	if _, err := newLogger(&b, "loud", "text"); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := newLogger(&b, "info", "xml"); err == nil {
		t.Error("bad format accepted")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/data/admin.kubeconfig": "/data/admin.kubeconfig",
		"/my data/it's":          `'/my data/it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWatchStopperEndsOnlyWatches(t *testing.T) {
	ws := &watchStopper{}
	ws.ctx, ws.stop = context.WithCancel(context.Background())
	ended := make(chan string, 2)
	h := ws.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ended <- r.URL.Path
		case <-time.After(300 * time.Millisecond):
			ended <- "timeout " + r.URL.Path
		}
	}))
	serve := func(path, verb string) {
		r := httptest.NewRequest("GET", path, nil)
		r = r.WithContext(request.WithRequestInfo(r.Context(), &request.RequestInfo{Verb: verb}))
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	go serve("/watch", "watch")
	go serve("/list", "list")
	time.Sleep(50 * time.Millisecond)
	ws.stop()
	got := map[string]bool{<-ended: true, <-ended: true}
	if !got["/watch"] || !got["timeout /list"] {
		t.Errorf("ended: %v; want the watch cancelled and the list left alone", got)
	}
}

func TestServingHosts(t *testing.T) {
	if got := servingHosts("example.test"); len(got) != 1 || got[0] != "example.test" {
		t.Errorf("servingHosts(example.test) = %v", got)
	}
	if got := servingHosts("10.0.0.1"); len(got) != 1 || got[0] != "10.0.0.1" {
		t.Errorf("servingHosts(10.0.0.1) = %v", got)
	}
	for _, wildcard := range []string{"", "0.0.0.0", "::"} {
		got := servingHosts(wildcard)
		name, _ := os.Hostname()
		if name != "" && (len(got) == 0 || got[0] != name) {
			t.Errorf("servingHosts(%q) = %v, want the host name %s first", wildcard, got, name)
		}
	}
}
