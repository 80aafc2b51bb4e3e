// Package fakedns is a small stand-in for an external DNS provider's HTTP
// API, which the DNSRecord example (examples/dnsrecord) reconciles through
// egress. It behaves as such services do where it matters to a controller:
//
//   - it keeps its own state: records in zones, each with an ID the service
//     assigns and a version that counts its writes;
//   - it is eventually consistent: a write is visible to reads (get, list)
//     only Delay after it was accepted, while writes always see the latest
//     state (so a second create of one name answers 409 with the record);
//   - it fails now and then: a configurable share of API requests answers
//     500, drawn from a seeded source, and InjectFaults makes the next
//     requests fail for sure, before or after the write is done;
//   - it wants a bearer token on every request;
//   - an admin endpoint changes a record behind its client's back (drift).
//
// The API, all JSON, every path but /healthz behind "Authorization: Bearer
// TOKEN":
//
//	GET    /v1/zones/{zone}/records?name=N&type=T  {"records": [Record...]}
//	POST   /v1/zones/{zone}/records                Record in, 201 Record; 409 {"error", "record"}
//	GET    /v1/zones/{zone}/records/{id}           Record, or 404
//	PUT    /v1/zones/{zone}/records/{id}           {"value", "ttl"} in, Record out
//	DELETE /v1/zones/{zone}/records/{id}           204, or 404
//	GET    /admin/records                          every record's latest state, now
//	PUT    /admin/records/{id}                     {"value", "ttl"}: a change nobody asked the client for
//	POST   /admin/faults                           {"count": N}: the next N API requests answer 500;
//	                                               with "afterWrite": true, the next N writes do, once done
//	GET    /admin/stats                            request and fault counters
//
// Errors are {"error": "message"}. Admin requests never fail on purpose and
// are not counted as API requests.
package fakedns

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Options configure a Server. Zero values get defaults in New.
type Options struct {
	// Token is the bearer token every request must carry. Required.
	Token string
	// Delay is how long after a write reads still show the state before
	// it. 0 makes reads consistent.
	Delay time.Duration
	// ErrorRate is the share of API requests, from 0 to 1, that answer
	// 500 without doing anything.
	ErrorRate float64
	// Seed seeds the draw of those failures, so that a run is repeatable.
	Seed uint64
	// Now is the clock (time.Now when nil); tests inject one to step
	// through the consistency delay.
	Now func() time.Time
	// Logger logs each request (never its token); nil logs nothing.
	Logger *slog.Logger
}

// Stats count what the service served.
type Stats struct {
	// Requests counts API requests (not admin ones), Faults those that
	// answered 500 on purpose.
	Requests int `json:"requests"`
	Faults   int `json:"faults"`
	// Creates, Updates and Deletes count the writes done, Conflicts the
	// creates refused because the record existed.
	Creates   int `json:"creates"`
	Updates   int `json:"updates"`
	Deletes   int `json:"deletes"`
	Conflicts int `json:"conflicts"`
}

// Server is the fake service, an http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu sync.Mutex // guards the fields below
	rs *records
	// rnd draws the random failures.
	rnd *rand.Rand
	// faults is how many of the next API requests fail; afterWrite says
	// whether they fail after doing their write (a lost response).
	faults     int
	afterWrite bool
	stats      Stats
}

var _ http.Handler = (*Server)(nil)

// New returns a Server.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts: opts,
		rs:   newRecords(opts.Delay),
		rnd:  rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		mux:  http.NewServeMux(),
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /v1/zones/{zone}/records", s.api(s.list))
	s.mux.HandleFunc("POST /v1/zones/{zone}/records", s.api(s.create))
	s.mux.HandleFunc("GET /v1/zones/{zone}/records/{id}", s.api(s.get))
	s.mux.HandleFunc("PUT /v1/zones/{zone}/records/{id}", s.api(s.update))
	s.mux.HandleFunc("DELETE /v1/zones/{zone}/records/{id}", s.api(s.remove))
	s.mux.HandleFunc("GET /admin/records", s.admin(s.adminList))
	s.mux.HandleFunc("PUT /admin/records/{id}", s.admin(s.adminUpdate))
	s.mux.HandleFunc("POST /admin/faults", s.admin(s.adminFaults))
	s.mux.HandleFunc("GET /admin/stats", s.admin(s.adminStats))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r)
	s.opts.Logger.Info("request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "status", rec.status)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// InjectFaults makes the next n API requests answer 500 before doing
// anything, or, with afterWrite, the next n writes (POST, PUT, DELETE)
// answer 500 after doing their write, as when a response is lost on its
// way back.
func (s *Server) InjectFaults(n int, afterWrite bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.afterWrite = n, afterWrite
}

// Records returns every record's latest state (what writes see).
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rs.all()
}

// Drift changes a record's value and TTL as someone other than the
// service's client would (the admin endpoint's PUT).
func (s *Server) Drift(id, value string, ttl int64) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rs.latest[id]
	if !ok {
		return Record{}, errNotFound
	}
	return s.rs.update(s.opts.Now(), r.Zone, id, value, ttl)
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// authorized reports whether r carries the token, and answers 401 if not.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) > len(prefix) && h[:len(prefix)] == prefix &&
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(s.opts.Token)) == 1 {
		return true
	}
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
	return false
}

// apiHandler handles an API request under s.mu; fail is true when the
// request is to answer 500 once its write is done.
type apiHandler func(w http.ResponseWriter, r *http.Request, fail bool)

// api wraps an API handler with the token check, the counters and the
// failures.
func (s *Server) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stats.Requests++
		fail, after := false, false
		switch {
		case s.faults > 0 && (!s.afterWrite || r.Method != http.MethodGet):
			s.faults--
			fail, after = true, s.afterWrite
		case s.opts.ErrorRate > 0 && s.rnd.Float64() < s.opts.ErrorRate:
			fail = true
		}
		if fail {
			s.stats.Faults++
		}
		if fail && !after {
			writeError(w, http.StatusInternalServerError, "internal error (injected)")
			return
		}
		h(w, r, fail)
	}
}

// admin wraps an admin handler with the token check and s.mu.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		h(w, r)
	}
}

// respond writes v with code, or, when fail is set, the 500 of a response
// lost after its write was done.
func respond(w http.ResponseWriter, code int, v any, fail bool) {
	if fail {
		writeError(w, http.StatusInternalServerError, "internal error (injected, after the write)")
		return
	}
	writeJSON(w, code, v)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, fail bool) {
	q := r.URL.Query()
	recs := s.rs.list(s.opts.Now(), r.PathValue("zone"), q.Get("name"), q.Get("type"))
	respond(w, http.StatusOK, map[string]any{"records": recs}, fail)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, fail bool) {
	rec, ok := s.rs.read(s.opts.Now(), r.PathValue("id"))
	if !ok || rec.Zone != r.PathValue("zone") {
		writeError(w, http.StatusNotFound, "record "+r.PathValue("id")+" not found")
		return
	}
	respond(w, http.StatusOK, rec, fail)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, fail bool) {
	var in Record
	if !readJSON(w, r, &in) {
		return
	}
	in.Zone = r.PathValue("zone")
	rec, err := s.rs.create(s.opts.Now(), in)
	switch {
	case errors.Is(err, errExists):
		s.stats.Conflicts++
		respond(w, http.StatusConflict, map[string]any{"error": err.Error(), "record": rec}, fail)
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		s.stats.Creates++
		respond(w, http.StatusCreated, rec, fail)
	}
}

// change is the body of a PUT.
type change struct {
	Value string `json:"value"`
	TTL   int64  `json:"ttl"`
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, fail bool) {
	var in change
	if !readJSON(w, r, &in) {
		return
	}
	rec, err := s.rs.update(s.opts.Now(), r.PathValue("zone"), r.PathValue("id"), in.Value, in.TTL)
	if writeErr(w, err) {
		return
	}
	s.stats.Updates++
	respond(w, http.StatusOK, rec, fail)
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request, fail bool) {
	if writeErr(w, s.rs.remove(s.opts.Now(), r.PathValue("zone"), r.PathValue("id"))) {
		return
	}
	s.stats.Deletes++
	if fail {
		writeError(w, http.StatusInternalServerError, "internal error (injected, after the write)")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) adminList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"records": s.rs.all()})
}

func (s *Server) adminUpdate(w http.ResponseWriter, r *http.Request) {
	var in change
	if !readJSON(w, r, &in) {
		return
	}
	cur, ok := s.rs.latest[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "record "+r.PathValue("id")+" not found")
		return
	}
	if in.Value == "" {
		in.Value = cur.Value
	}
	if in.TTL == 0 {
		in.TTL = cur.TTL
	}
	rec, err := s.rs.update(s.opts.Now(), cur.Zone, cur.ID, in.Value, in.TTL)
	if writeErr(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) adminFaults(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Count      int  `json:"count"`
		AfterWrite bool `json:"afterWrite"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	if in.Count < 0 {
		writeError(w, http.StatusBadRequest, "count must not be negative")
		return
	}
	s.faults, s.afterWrite = in.Count, in.AfterWrite
	writeJSON(w, http.StatusOK, map[string]any{"pending": s.faults, "afterWrite": s.afterWrite})
}

func (s *Server) adminStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.stats)
}

// maxBody bounds a request body.
const maxBody = 64 << 10

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return false
	}
	return true
}

// writeErr answers a store error and reports whether err was one.
func writeErr(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
	return true
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
