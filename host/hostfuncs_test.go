package host_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// objects is an ObjectReader over a fixed set of objects.
type objects struct{ items []abi.RawJSON }

func (o objects) GetObject(_ context.Context, _ string, req abi.GetRequest) ([]byte, bool, error) {
	for _, it := range o.items {
		if ref := abi.RefOf(it); ref.Kind == req.Kind && ref.Namespace == req.Namespace && ref.Name == req.Name {
			return it, true, nil
		}
	}
	return nil, false, nil
}

func (o objects) ListObjects(_ context.Context, _ string, req abi.ListRequest) ([][]byte, error) {
	var out [][]byte
	for _, it := range o.items {
		if abi.RefOf(it).Kind == req.Kind {
			out = append(out, it)
		}
	}
	return out, nil
}

type recordedEvent struct {
	plugin    string
	regarding abi.ObjectRef
	ev        abi.Event
}

type events struct {
	mu  sync.Mutex
	got []recordedEvent
}

func (e *events) RecordEvent(_ context.Context, plugin string, regarding abi.ObjectRef, ev abi.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, recordedEvent{plugin, regarding, ev})
	return nil
}

// records is a slog.Handler keeping every record with its attributes
// flattened to strings.
type records struct {
	mu    *sync.Mutex
	attrs []slog.Attr
	got   *[]map[string]string
}

func newRecords() *records { return &records{mu: new(sync.Mutex), got: new([]map[string]string)} }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &records{mu: r.mu, attrs: append(append([]slog.Attr{}, r.attrs...), as...), got: r.got}
}
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
	for _, a := range r.attrs {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	*r.got = append(*r.got, m)
	r.mu.Unlock()
	return nil
}

func TestHostFunctions(t *testing.T) {
	cm := abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"default"},"data":{"a":"b"}}`)
	// Larger than the guest's 4 KiB host-call buffer: fetched with result.
	big := abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"default"},"data":{"a":"` + strings.Repeat("x", 20000) + `"}}`)
	logs, evs := newRecords(), &events{}
	h := hosttest.NewHost(t, host.Options{Logger: slog.New(logs), Objects: objects{[]abi.RawJSON{cm, big}}, Events: evs})
	allowed := hosttest.LoadWith(t, h, "faulty", host.Config{Permissions: host.Permissions{Read: []string{"ConfigMap"}, Events: true}})
	ctx := context.Background()
	req := func(kind, name string) *abi.ReconcileRequest {
		return &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{
			"mode": "get", "apiVersion": "v1", "kind": kind, "namespace": "default", "name": name}}
	}

	resp, err := allowed.Reconcile(ctx, req("ConfigMap", "cfg"))
	if err != nil || resp.Error != "" {
		t.Fatalf("reconcile: %v %q", err, resp.Error)
	}
	if !resp.Status.Bool("found") || resp.Status.String("object", "data", "a") != "b" || resp.Status.Int("listed") != 2 {
		t.Fatalf("status = %s", resp.Status)
	}
	var log map[string]string
	for _, m := range *logs.got {
		if m["msg"] == "plugin log" {
			log = m
		}
	}
	if log == nil || log["plugin"] != "faulty" || log["name"] != "w1" || log["kind"] != "Widget" || log["message"] != "read objects" || log["level"] != "WARN" {
		t.Fatalf("plugin log record = %v", log)
	}
	if len(evs.got) != 1 || evs.got[0].plugin != "faulty" || evs.got[0].regarding.Name != "w1" || evs.got[0].ev.Reason != "Read" {
		t.Fatalf("events = %+v", evs.got)
	}

	resp, err = allowed.Reconcile(ctx, req("ConfigMap", "big"))
	if err != nil || len(resp.Status.String("object", "data", "a")) != 20000 {
		t.Fatalf("large response: %v %.200s", err, resp.Status)
	}
	if resp, err = allowed.Reconcile(ctx, req("ConfigMap", "missing")); err != nil || resp.Status.Bool("found") {
		t.Fatalf("missing object: %v %s", err, resp.Status)
	}

	// Denials are errors the guest sees; here it returns them as its error.
	resp, err = allowed.Reconcile(ctx, req("Secret", "s"))
	if err != nil || !strings.Contains(resp.Error, `host: permission denied: plugin "faulty" may not read Secret`) {
		t.Fatalf("denied read: %v %q", err, resp.Error)
	}
	noEvents := hosttest.LoadWith(t, h, "faulty", host.Config{Permissions: host.Permissions{Read: []string{"*"}}})
	resp, err = noEvents.Reconcile(ctx, req("ConfigMap", "cfg"))
	if err != nil || !strings.Contains(resp.Error, "may not emit events") {
		t.Fatalf("denied event: %v %q", err, resp.Error)
	}
}
