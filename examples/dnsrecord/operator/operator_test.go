package operator_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/dnsrecord/fakedns"
	"github.com/setpoint-dev/setpoint/examples/dnsrecord/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

const (
	token = "t0ken-for-tests"
	delay = 500 * time.Millisecond
	uid   = "uid-1"
)

// clock is the fake service's clock, stepped through its consistency delay.
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

// nativeHTTP answers the plugin's egress calls with an http.Client, as
// the host does inside the server.
func nativeHTTP(c *http.Client) func(abi.HTTPRequest) (abi.HTTPResponse, error) {
	return func(r abi.HTTPRequest) (abi.HTTPResponse, error) {
		req, err := http.NewRequest(r.Method, r.URL, bytes.NewReader(r.Body))
		if err != nil {
			return abi.HTTPResponse{}, err
		}
		for k, v := range r.Headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return abi.HTTPResponse{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return abi.HTTPResponse{Status: int32(resp.StatusCode), Body: b}, err
	}
}

// env is one DNSRecord, the fake service and a host holding the Secret;
// reconcile and finalize stand in for the engine: they call the operator
// and keep the status it returns, as the engine writes it.
type env struct {
	t      *testing.T
	dns    *fakedns.Server
	clk    *clock
	op     *operator.Operator
	host   *plugintest.Host
	config map[string]string
	obj    map[string]any
	events []abi.Event
}

func newEnv(t *testing.T) *env {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dns := fakedns.New(fakedns.Options{Token: token, Delay: delay, Now: clk.now})
	hs := httptest.NewServer(dns)
	t.Cleanup(hs.Close)
	host := &plugintest.Host{HTTPHandler: nativeHTTP(hs.Client())}
	host.Add(secret("dns-credentials", token))
	return &env{
		t: t, dns: dns, clk: clk, host: host,
		op: &operator.Operator{},
		config: map[string]string{
			operator.ConfigEndpoint:     hs.URL,
			operator.ConfigCredentials:  "dns-system/dns-credentials",
			operator.ConfigResyncPeriod: "30s",
		},
		obj: map[string]any{
			"apiVersion": operator.APIVersion, "kind": operator.Kind,
			"metadata": map[string]any{"name": "www", "namespace": "default", "uid": uid, "generation": 1},
			"spec":     map[string]any{"zone": "example.com", "name": "www", "type": "A", "value": "192.0.2.10", "ttl": 300},
		},
	}
}

// withObject returns an env for another DNSRecord of the same name and
// spec, with its own UID, on the same service and host.
func (e *env) withObject(uid string) *env {
	o := *e
	o.obj = map[string]any{
		"apiVersion": operator.APIVersion, "kind": operator.Kind,
		"metadata": map[string]any{"name": "www", "namespace": "other", "uid": uid, "generation": 1},
		"spec":     e.obj["spec"],
	}
	o.events = nil
	return &o
}

func secret(name, tok string) abi.RawJSON {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": "dns-system"},
		"data":     map[string]string{"token": base64.StdEncoding.EncodeToString([]byte(tok))},
	})
	return b
}

func (e *env) raw() abi.RawJSON {
	b, err := json.Marshal(e.obj)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// setSpec changes a spec field and bumps the generation, as the API does.
func (e *env) setSpec(field string, v any) {
	e.obj["spec"].(map[string]any)[field] = v
	md := e.obj["metadata"].(map[string]any)
	md["generation"] = md["generation"].(int) + 1
}

// reconcile calls Reconcile and keeps its status; it returns the response.
func (e *env) reconcile() *abi.ReconcileResponse {
	e.t.Helper()
	resp, err := e.op.Reconcile(e.host, &abi.ReconcileRequest{Object: e.raw(), Config: e.config})
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	if len(resp.Status) > 0 {
		var st map[string]any
		if err := json.Unmarshal(resp.Status, &st); err != nil {
			e.t.Fatalf("status %s: %v", resp.Status, err)
		}
		e.obj["status"] = st
	}
	e.events = append(e.events, resp.Events...)
	return resp
}

// mustSync reconciles and fails unless it succeeded.
func (e *env) mustSync() *abi.ReconcileResponse {
	e.t.Helper()
	resp := e.reconcile()
	if resp.Error != "" {
		e.t.Fatalf("reconcile failed: %s", resp.Error)
	}
	return resp
}

func (e *env) status() operator.Status {
	var st operator.Status
	b, _ := json.Marshal(e.obj["status"])
	_ = json.Unmarshal(b, &st)
	return st
}

func (e *env) synced() operator.Condition {
	for _, c := range e.status().Conditions {
		if c.Type == operator.ConditionSynced {
			return c
		}
	}
	e.t.Fatalf("no Synced condition in %v", e.obj["status"])
	return operator.Condition{}
}

// records are the service's records, as writes see them.
func (e *env) records() []fakedns.Record { return e.dns.Records() }

func (e *env) oneRecord() fakedns.Record {
	e.t.Helper()
	recs := e.records()
	if len(recs) != 1 {
		e.t.Fatalf("the service holds %d records, want 1: %+v", len(recs), recs)
	}
	return recs[0]
}

func (e *env) lastEvent(reason string) abi.Event {
	e.t.Helper()
	for i := len(e.events) - 1; i >= 0; i-- {
		if e.events[i].Reason == reason {
			return e.events[i]
		}
	}
	e.t.Fatalf("no %s event among %+v", reason, e.events)
	return abi.Event{}
}

func TestCreate(t *testing.T) {
	e := newEnv(t)
	resp := e.mustSync()
	rec := e.oneRecord()
	if rec.Name != "www" || rec.Zone != "example.com" || rec.Type != "A" || rec.Value != "192.0.2.10" || rec.TTL != 300 || rec.Owner != uid {
		t.Fatalf("record = %+v", rec)
	}
	if st := e.status(); st.ExternalID != rec.ID || st.ExternalVersion != 1 {
		t.Errorf("status = %+v, want the record's ID and version", st)
	}
	if c := e.synced(); c.Status != "True" || c.Reason != operator.ReasonInSync || c.ObservedGeneration != 1 || !strings.Contains(c.Message, rec.ID) {
		t.Errorf("Synced = %+v", c)
	}
	if resp.RequeueAfter != 30*time.Second {
		t.Errorf("RequeueAfter = %v, want the resync period", resp.RequeueAfter)
	}
	if ev := e.lastEvent(operator.EventCreated); !strings.Contains(ev.Message, "www.example.com A 192.0.2.10") {
		t.Errorf("event = %+v", ev)
	}

	// Reads do not show the record yet: the next reconcile (the status
	// write triggers one) must not create a second.
	e.mustSync()
	e.clk.step(delay)
	e.mustSync()
	e.oneRecord()
	if st := e.dns.Stats(); st.Creates != 1 || st.Updates != 0 {
		t.Errorf("stats = %+v, want one create and no update", st)
	}
}

// TestCreateResponseLost: the service does the create but its answer is
// lost (500); the retry, which reads do not help yet, adopts the record
// the service refuses to create twice.
func TestCreateResponseLost(t *testing.T) {
	e := newEnv(t)
	e.dns.InjectFaults(1, true)
	resp := e.reconcile()
	if resp.Error == "" || resp.Terminal || !strings.Contains(resp.Error, "500") {
		t.Fatalf("reconcile with the answer lost: error %q terminal %v, want a retryable error naming the 500", resp.Error, resp.Terminal)
	}
	if c := e.synced(); c.Status != "False" || c.Reason != operator.ReasonSyncFailed || !strings.Contains(c.Message, "create record www.example.com A") {
		t.Errorf("Synced after the failure = %+v", c)
	}
	e.mustSync()
	rec := e.oneRecord()
	if e.status().ExternalID != rec.ID || e.synced().Status != "True" {
		t.Errorf("status = %+v", e.status())
	}
	if st := e.dns.Stats(); st.Creates != 1 || st.Conflicts != 1 {
		t.Errorf("stats = %+v, want one create and one refused", st)
	}
	e.lastEvent(operator.EventAdopted)
}

// TestStatusLost: the status with the ID was never written; the record is
// found by name and adopted, not created again.
func TestStatusLost(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	delete(e.obj, "status")
	e.clk.step(delay)
	e.mustSync()
	rec := e.oneRecord()
	if e.status().ExternalID != rec.ID {
		t.Errorf("status = %+v", e.status())
	}
	if st := e.dns.Stats(); st.Creates != 1 || st.Conflicts != 0 {
		t.Errorf("stats = %+v: the record was not found by name", st)
	}
}

// TestSomeoneElsesRecord: a record of the name that another client
// created is not taken over.
func TestSomeoneElsesRecord(t *testing.T) {
	e := newEnv(t)
	other := e.withObject("uid-other")
	other.mustSync()
	e.clk.step(delay)
	resp := e.reconcile()
	if resp.Error == "" || !strings.Contains(resp.Error, "belongs to someone else") {
		t.Fatalf("error = %q", resp.Error)
	}
	if rec := e.oneRecord(); rec.Owner != "uid-other" {
		t.Errorf("record = %+v", rec)
	}
	// Its deletion leaves the other's record alone.
	e.finalize()
	e.oneRecord()
}

func TestUpdate(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	e.clk.step(delay)
	e.setSpec("value", "192.0.2.20")
	e.setSpec("ttl", 60)
	e.mustSync()
	rec := e.oneRecord()
	if rec.Value != "192.0.2.20" || rec.TTL != 60 || rec.Version != 2 {
		t.Fatalf("record = %+v", rec)
	}
	if c := e.synced(); c.Status != "True" || c.ObservedGeneration != 3 {
		t.Errorf("Synced = %+v", c)
	}
	e.lastEvent(operator.EventUpdated)

	// Reads still show version 1: not drift, read again soon.
	resp := e.mustSync()
	if resp.RequeueAfter != operator.StaleRecheck {
		t.Errorf("RequeueAfter on a stale read = %v, want %v", resp.RequeueAfter, operator.StaleRecheck)
	}
	if c := e.synced(); c.Status != "True" {
		t.Errorf("Synced on a stale read = %+v, want it kept", c)
	}
	e.clk.step(delay)
	if resp := e.mustSync(); resp.RequeueAfter != 30*time.Second {
		t.Errorf("RequeueAfter = %v", resp.RequeueAfter)
	}
	if st := e.dns.Stats(); st.Updates != 1 {
		t.Errorf("stats = %+v, want exactly one update", st)
	}
}

func TestDrift(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	id := e.oneRecord().ID
	if _, err := e.dns.Drift(id, "203.0.113.66", 5); err != nil {
		t.Fatal(err)
	}
	e.clk.step(delay)
	e.mustSync() // the resync
	rec := e.oneRecord()
	if rec.Value != "192.0.2.10" || rec.TTL != 300 || rec.Version != 3 {
		t.Fatalf("record after the resync = %+v, want it repaired", rec)
	}
	ev := e.lastEvent(operator.EventDriftRepaired)
	if ev.Type != "Warning" || !strings.Contains(ev.Message, "203.0.113.66") {
		t.Errorf("event = %+v", ev)
	}
	if st := e.status(); st.SyncedGeneration != 1 {
		t.Errorf("syncedGeneration = %d, want 1", st.SyncedGeneration)
	}

	// A failure just before the drift is read does not make it look like
	// a new spec.
	if _, err := e.dns.Drift(id, "203.0.113.67", 300); err != nil {
		t.Fatal(err)
	}
	e.clk.step(delay)
	e.dns.InjectFaults(1, false)
	if resp := e.reconcile(); resp.Error == "" {
		t.Fatal("reconcile with a 500: no error")
	}
	e.mustSync()
	if ev := e.lastEvent(operator.EventDriftRepaired); !strings.Contains(ev.Message, "203.0.113.67") {
		t.Errorf("event after a failure = %+v, want the drift repaired", ev)
	}
	if rec := e.oneRecord(); rec.Value != "192.0.2.10" || e.status().ExternalVersion != rec.Version {
		t.Errorf("record %+v, status %+v", rec, e.status())
	}

	// Deleted behind its back: created again, and said so.
	if _, err := e.dns.Drift(id, "", 0); err == nil {
		t.Fatal("drift with an empty value worked")
	}
	e.clk.step(delay)
	e.mustSync()
	req, _ := http.NewRequest("DELETE", e.config[operator.ConfigEndpoint]+"/v1/zones/example.com/records/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete behind its back: %v %v", resp, err)
	}
	e.clk.step(delay)
	e.mustSync()
	rec = e.oneRecord()
	if rec.ID == id || e.status().ExternalID != rec.ID || e.status().ExternalVersion != 1 {
		t.Errorf("record %+v, status %+v: want a new record and its ID", rec, e.status())
	}
	if ev := e.lastEvent(operator.EventDriftRepaired); !strings.Contains(ev.Message, "deleted outside Setpoint") {
		t.Errorf("event = %+v", ev)
	}
}

// TestRetryOn500: each 500 is an error the engine retries with backoff,
// with the status saying what failed, until the service answers.
func TestRetryOn500(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	e.clk.step(delay)
	e.dns.InjectFaults(2, false)
	e.setSpec("ttl", 120)
	for i := range 2 {
		resp := e.reconcile()
		if resp.Error == "" || resp.Terminal || !strings.Contains(resp.Error, "the service answered 500") {
			t.Fatalf("attempt %d: error %q terminal %v", i, resp.Error, resp.Terminal)
		}
		if c := e.synced(); c.Status != "False" || c.Message != resp.Error {
			t.Errorf("attempt %d: Synced = %+v", i, c)
		}
		if st := e.status(); st.ExternalID == "" {
			t.Errorf("attempt %d: the failure lost the external ID: %+v", i, st)
		}
	}
	e.mustSync()
	if rec := e.oneRecord(); rec.TTL != 120 {
		t.Errorf("record = %+v", rec)
	}
	if c := e.synced(); c.Status != "True" {
		t.Errorf("Synced = %+v", c)
	}
}

func TestFinalize(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	fin := e.finalize()
	if len(e.records()) != 0 {
		t.Fatalf("records after finalize: %+v", e.records())
	}
	if len(fin.Events) != 1 || fin.Events[0].Reason != operator.EventDeleted || !strings.Contains(fin.Events[0].Message, "deleted record www.example.com A") {
		t.Errorf("events = %+v", fin.Events)
	}
	// Called again (the finalizer's removal failed): the 404 is fine.
	fin = e.finalize()
	if !strings.Contains(fin.Events[0].Message, "already gone") {
		t.Errorf("events = %+v", fin.Events)
	}
}

// TestFinalizeWithoutID: a record whose ID never reached the status is
// found by name and deleted.
func TestFinalizeWithoutID(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	delete(e.obj, "status")
	e.clk.step(delay)
	e.finalize()
	if len(e.records()) != 0 {
		t.Fatalf("records after finalize: %+v", e.records())
	}
}

func TestFinalizeRetries(t *testing.T) {
	e := newEnv(t)
	e.mustSync()
	e.dns.InjectFaults(1, false)
	resp, err := e.op.Finalize(e.host, &abi.FinalizeRequest{Object: e.raw(), Config: e.config})
	if err != nil || resp.Done || resp.Terminal || !strings.Contains(resp.Error, "500") {
		t.Fatalf("finalize with a 500: %+v, %v; want a retryable error", resp, err)
	}
	e.finalize()
}

func (e *env) finalize() *abi.FinalizeResponse {
	e.t.Helper()
	resp, err := e.op.Finalize(e.host, &abi.FinalizeRequest{Object: e.raw(), Config: e.config})
	if err != nil || !resp.Done || resp.Error != "" {
		e.t.Fatalf("finalize: %+v, %v", resp, err)
	}
	return resp
}

func TestCredentials(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		want   string
		noLeak bool
	}{
		{name: "no Secret", setup: func(e *env) { e.host = &plugintest.Host{HTTPHandler: e.host.HTTPHandler} },
			want: "credentials: Secret dns-system/dns-credentials not found"},
		{name: "read denied", setup: func(e *env) {
			e.host.Deny = func(string) error { return errors.New("Secret is not in spec.permissions.read") }
		}, want: "spec.permissions.read: [secrets]"},
		{name: "no key", setup: func(e *env) { e.config[operator.ConfigCredentialsKey] = "password" },
			want: `has no key "password"`},
		{name: "wrong token", setup: func(e *env) {
			e.host = &plugintest.Host{HTTPHandler: e.host.HTTPHandler}
			e.host.Add(secret("dns-credentials", "not-the-token"))
		}, want: "the service answered 401 Unauthorized (check the token in the credentials Secret)", noLeak: true},
		{name: "egress denied", setup: func(e *env) { e.host.HTTPHandler = nil },
			want: "is not granted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			resp := e.reconcile()
			if !strings.Contains(resp.Error, tc.want) || resp.Terminal {
				t.Errorf("error %q terminal %v, want a retryable error with %q", resp.Error, resp.Terminal, tc.want)
			}
			if strings.Contains(string(resp.Status), "not-the-token") || strings.Contains(resp.Error, "not-the-token") {
				t.Errorf("the token leaked: %s %s", resp.Status, resp.Error)
			}
			if len(e.records()) != 0 {
				t.Errorf("records: %+v", e.records())
			}
		})
	}
}

// TestInvalidRecord: a record the service refuses as invalid is a terminal
// error, not retried until the spec changes.
func TestInvalidRecord(t *testing.T) {
	e := newEnv(t)
	e.setSpec("ttl", 0) // the kind's schema forbids it; the service too
	resp := e.reconcile()
	if !resp.Terminal || !strings.Contains(resp.Error, "the service answered 400 Bad Request: fakedns: invalid record: ttl must be positive") {
		t.Errorf("error %q terminal %v, want a terminal 400", resp.Error, resp.Terminal)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{operator.ConfigEndpoint, "127.0.0.1:8053", "not an http:// or https:// URL"},
		{operator.ConfigCredentials, "", "does not name a Secret"},
		{operator.ConfigCredentials, "ns/", "does not name a Secret"},
		{operator.ConfigResyncPeriod, "soon", "not a positive duration"},
	} {
		e := newEnv(t)
		e.config[tc.key] = tc.value
		resp := e.reconcile()
		if !resp.Terminal || !strings.Contains(resp.Error, tc.want) {
			t.Errorf("%s=%q: error %q terminal %v, want a terminal error with %q", tc.key, tc.value, resp.Error, resp.Terminal, tc.want)
		}
	}
	// A Secret named without a namespace is read from the record's.
	e := newEnv(t)
	e.config[operator.ConfigCredentials] = "dns-credentials"
	if resp := e.reconcile(); !strings.Contains(resp.Error, "Secret default/dns-credentials not found") {
		t.Errorf("error = %q", resp.Error)
	}
}
