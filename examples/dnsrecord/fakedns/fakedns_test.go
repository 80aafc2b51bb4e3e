package fakedns_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/dnsrecord/fakedns"
)

const token = "s3cret-token"

// clock is a settable clock for the consistency delay.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type service struct {
	t   *testing.T
	srv *fakedns.Server
	url string
	clk *clock
}

func start(t *testing.T, opts fakedns.Options) *service {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.Token, opts.Now = token, clk.now
	srv := fakedns.New(opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &service{t: t, srv: srv, url: hs.URL, clk: clk}
}

// do sends a request with the token and decodes a JSON answer into out.
func (s *service) do(method, path string, body any, out any) int {
	s.t.Helper()
	return s.doAs(token, method, path, body, out)
}

func (s *service) doAs(tok, method, path string, body any, out any) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

const records = "/v1/zones/example.com/records"

func TestToken(t *testing.T) {
	s := start(t, fakedns.Options{})
	for _, tok := range []string{"", "wrong"} {
		var e map[string]string
		if code := s.doAs(tok, "GET", records, nil, &e); code != http.StatusUnauthorized || e["error"] == "" {
			t.Errorf("token %q: %d %v, want 401 with an error", tok, code, e)
		}
	}
	if code := s.do("GET", records, nil, nil); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
}

func TestEventualConsistency(t *testing.T) {
	s := start(t, fakedns.Options{Delay: time.Second})
	var rec fakedns.Record
	if code := s.do("POST", records, fakedns.Record{Name: "www", Type: "A", Value: "192.0.2.1", TTL: 300, Owner: "u1"}, &rec); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if rec.ID == "" || rec.Version != 1 || rec.Zone != "example.com" || rec.Owner != "u1" {
		t.Fatalf("created %+v", rec)
	}
	// Not visible to reads yet, but writes see it.
	if code := s.do("GET", records+"/"+rec.ID, nil, nil); code != http.StatusNotFound {
		t.Errorf("get before the delay: %d, want 404", code)
	}
	var conflict struct {
		Error  string         `json:"error"`
		Record fakedns.Record `json:"record"`
	}
	if code := s.do("POST", records, fakedns.Record{Name: "www", Type: "A", Value: "192.0.2.9", TTL: 60}, &conflict); code != http.StatusConflict || conflict.Record != rec {
		t.Errorf("second create: %d %+v, want 409 with %+v", code, conflict, rec)
	}
	s.clk.step(time.Second)
	var got fakedns.Record
	if code := s.do("GET", records+"/"+rec.ID, nil, &got); code != http.StatusOK || got != rec {
		t.Errorf("get after the delay: %d %+v", code, got)
	}

	var upd fakedns.Record
	if code := s.do("PUT", records+"/"+rec.ID, map[string]any{"value": "192.0.2.2", "ttl": 60}, &upd); code != http.StatusOK || upd.Version != 2 || upd.Value != "192.0.2.2" {
		t.Fatalf("update: %d %+v", code, upd)
	}
	s.clk.step(500 * time.Millisecond)
	if s.do("GET", records+"/"+rec.ID, nil, &got); got.Version != 1 {
		t.Errorf("read half-way through the delay shows version %d, want the stale 1", got.Version)
	}
	s.clk.step(500 * time.Millisecond)
	if s.do("GET", records+"/"+rec.ID, nil, &got); got != upd {
		t.Errorf("read after the delay = %+v, want %+v", got, upd)
	}

	var list struct{ Records []fakedns.Record }
	s.do("GET", records+"?name=www&type=A", nil, &list)
	if len(list.Records) != 1 || list.Records[0] != upd {
		t.Errorf("list = %+v", list.Records)
	}
	s.do("GET", records+"?name=www&type=TXT", nil, &list)
	if len(list.Records) != 0 {
		t.Errorf("list of TXT = %+v", list.Records)
	}

	if code := s.do("DELETE", records+"/"+rec.ID, nil, nil); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
	if code := s.do("DELETE", records+"/"+rec.ID, nil, nil); code != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", code)
	}
	if code := s.do("GET", records+"/"+rec.ID, nil, nil); code != http.StatusOK {
		t.Errorf("get right after the delete: %d, want the stale 200", code)
	}
	s.clk.step(time.Second)
	if code := s.do("GET", records+"/"+rec.ID, nil, nil); code != http.StatusNotFound {
		t.Errorf("get after the delay: %d, want 404", code)
	}
	if st := s.srv.Stats(); st.Creates != 1 || st.Updates != 1 || st.Deletes != 1 || st.Conflicts != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestInvalid(t *testing.T) {
	s := start(t, fakedns.Options{})
	for _, r := range []fakedns.Record{
		{Name: "www", Type: "MX", Value: "x", TTL: 1},
		{Name: "www", Type: "A", TTL: 1},
		{Name: "", Type: "A", Value: "x", TTL: 1},
		{Name: "www", Type: "A", Value: "x"},
	} {
		if code := s.do("POST", records, r, nil); code != http.StatusBadRequest {
			t.Errorf("create %+v: %d, want 400", r, code)
		}
	}
	if code := s.do("PUT", records+"/r99", map[string]any{"value": "x", "ttl": 1}, nil); code != http.StatusNotFound {
		t.Errorf("update of a missing record: %d", code)
	}
}

func TestFaults(t *testing.T) {
	s := start(t, fakedns.Options{})
	if code := s.do("POST", "/admin/faults", map[string]any{"count": 2}, nil); code != http.StatusOK {
		t.Fatalf("faults: %d", code)
	}
	for range 2 {
		if code := s.do("POST", records, fakedns.Record{Name: "a", Type: "A", Value: "192.0.2.1", TTL: 1}, nil); code != http.StatusInternalServerError {
			t.Errorf("create with a fault pending: %d, want 500", code)
		}
	}
	if n := len(s.srv.Records()); n != 0 {
		t.Errorf("a failed create wrote %d records", n)
	}
	// A lost response: the write is done, the client sees 500.
	s.srv.InjectFaults(1, true)
	if code := s.do("POST", records, fakedns.Record{Name: "a", Type: "A", Value: "192.0.2.1", TTL: 1}, nil); code != http.StatusInternalServerError {
		t.Errorf("create with a fault after the write: %d, want 500", code)
	}
	if n := len(s.srv.Records()); n != 1 {
		t.Errorf("a create whose response was lost wrote %d records, want 1", n)
	}
	if code := s.do("POST", records, fakedns.Record{Name: "a", Type: "A", Value: "192.0.2.1", TTL: 1}, nil); code != http.StatusConflict {
		t.Errorf("create again: %d, want 409", code)
	}
	// Admin requests never fail and are not counted.
	s.srv.InjectFaults(5, false)
	var st fakedns.Stats
	if code := s.do("GET", "/admin/stats", nil, &st); code != http.StatusOK || st.Requests != 4 || st.Faults != 3 {
		t.Errorf("stats: %d %+v", code, st)
	}
}

// TestErrorRate: the random failures are a share of the requests, and the
// same seed fails the same requests.
func TestErrorRate(t *testing.T) {
	run := func(seed uint64) []int {
		s := start(t, fakedns.Options{ErrorRate: 0.3, Seed: seed})
		var codes []int
		for range 200 {
			codes = append(codes, s.do("GET", records, nil, nil))
		}
		return codes
	}
	a, b := run(7), run(7)
	failed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: %d with one run, %d with another of the same seed", i, a[i], b[i])
		}
		if a[i] == http.StatusInternalServerError {
			failed++
		}
	}
	if failed < 30 || failed > 90 {
		t.Errorf("%d of 200 requests failed at a rate of 0.3", failed)
	}
}

func TestDrift(t *testing.T) {
	s := start(t, fakedns.Options{})
	var rec fakedns.Record
	s.do("POST", records, fakedns.Record{Name: "www", Type: "A", Value: "192.0.2.1", TTL: 300}, &rec)
	var drifted fakedns.Record
	if code := s.do("PUT", "/admin/records/"+rec.ID, map[string]any{"value": "198.51.100.7"}, &drifted); code != http.StatusOK {
		t.Fatalf("admin update: %d", code)
	}
	if drifted.Value != "198.51.100.7" || drifted.TTL != 300 || drifted.Version != 2 {
		t.Errorf("drifted = %+v", drifted)
	}
	var all struct{ Records []fakedns.Record }
	s.do("GET", "/admin/records", nil, &all)
	if len(all.Records) != 1 || all.Records[0] != drifted {
		t.Errorf("admin records = %+v", all.Records)
	}
	if _, err := s.srv.Drift("r99", "x", 1); err == nil {
		t.Error("drift of a missing record: no error")
	}
}
