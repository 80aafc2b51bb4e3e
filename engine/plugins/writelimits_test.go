package plugins

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A plugin's host-call writes past its burst are answered 429
// TooManyRequests, counted, until the bucket refills; its deletes pass, and
// another plugin has a bucket of its own.
func TestWriteObjectRateLimited(t *testing.T) {
	svc := newWriteService(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	w, err := NewWriteLimiter(WriteLimits{Rate: 1, Burst: 3, Now: clock.now}, reg)
	if err != nil {
		t.Fatal(err)
	}
	o := NewObjects(svc, quietLogger())
	o.LimitWrites(w)
	ctx := context.Background()
	create := func(plugin, name string) abi.WriteResponse {
		return o.WriteObject(ctx, plugin, abi.HostCreate, abi.WriteRequest{Object: note(name, "small", "")})
	}
	for i := range 3 {
		if r := create("busy", fmt.Sprint("n", i)); r.Error != "" {
			t.Fatalf("write %d within the burst: %s", i, r.Error)
		}
	}
	r := create("busy", "n3")
	if r.Code != 429 || r.Reason != "TooManyRequests" || !strings.Contains(r.Error, "plugin busy writes faster than its limit of 1 writes/s (burst 3)") {
		t.Fatalf("write past the burst = %+v, want 429 TooManyRequests naming the limit", r)
	}
	if got := testutil.ToFloat64(w.throttled.WithLabelValues("busy", sourceHostCall)); got != 1 {
		t.Errorf("throttled metric = %v, want 1", got)
	}
	del := o.WriteObject(ctx, "busy", abi.HostDelete, abi.WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n0"})
	if del.Error != "" {
		t.Errorf("delete over the limit: %s", del.Error)
	}
	if r := create("calm", "c0"); r.Error != "" {
		t.Errorf("another plugin was throttled: %s", r.Error)
	}
	clock.add(time.Second)
	if r := create("busy", "n3"); r.Error != "" {
		t.Errorf("write after the bucket refilled: %s", r.Error)
	}
}

// The children a controller writes for a plugin take from the same bucket,
// waiting for their turn up to the reconcile's deadline; its status and
// event writes do not.
func TestLimitedClientChildren(t *testing.T) {
	svc := newWriteService(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w, err := NewWriteLimiter(WriteLimits{Rate: 1, Burst: 2, Now: clock.now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	c := w.Client("p", svc, []controller.Kind{{Resource: notes, Kind: "Note", Namespaced: true}})
	ctx := context.Background()
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(note(name, "small", "")); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace("default")
		return u
	}
	// A turn further off than the reconcile's deadline is refused at once.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	var errs []string
	for i := range 3 {
		if _, err := c.Create(short, notes, obj(fmt.Sprint("c", i)), metav1.CreateOptions{}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "writes faster than its limit") {
		t.Fatalf("child creates past the burst of 2: errors %q", errs)
	}
	// A turn within it is waited for: the write is made, not failed.
	fast, err := NewWriteLimiter(WriteLimits{Rate: 20, Burst: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc := fast.Client("q", svc, []controller.Kind{{Resource: notes, Kind: "Note", Namespaced: true}})
	start := time.Now()
	for i := range 3 {
		if _, err := fc.Create(ctx, notes, obj(fmt.Sprint("f", i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("child create %d at 20/s, burst 1: %v", i, err)
		}
	}
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Errorf("3 child creates at 20 writes/s, burst 1, took %s: they did not wait their turn", took)
	}
	ev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Event",
		"metadata": map[string]any{"name": "e1", "namespace": "default"}, "involvedObject": map[string]any{"name": "c0"},
		"reason": "Test", "message": "m", "type": "Normal"}}
	if _, err := c.Create(ctx, controller.EventsResource, ev, metav1.CreateOptions{}); err != nil {
		t.Errorf("an event over the children's limit: %v", err)
	}
}

type childrenCaller struct{ Caller }

func (childrenCaller) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Children: make([]abi.RawJSON, 3), Status: abi.RawJSON(`{"state":"x"}`)}, nil
}

// A reconcile that asks for more children than the quota is a terminal
// error of the plugin's, with nothing applied, counted in its errors.
func TestChildrenQuota(t *testing.T) {
	w, _ := NewWriteLimiter(WriteLimits{MaxChildren: 2}, nil)
	c := &counters{}
	cc := countingCaller{Caller: childrenCaller{}, c: c, writes: w}
	resp, err := cc.Reconcile(context.Background(), &abi.ReconcileRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Terminal || resp.Children != nil || !strings.Contains(resp.Error, "asked for 3 children of one object, more than the quota of 2") {
		t.Errorf("response = %+v", resp)
	}
	if c.errors.Load() != 1 || c.calls.Load() != 1 {
		t.Errorf("calls %d errors %d, want 1 and 1", c.calls.Load(), c.errors.Load())
	}
	cc.RecordFailure(fmt.Errorf("update status: refused"))
	if c.errors.Load() != 2 || *c.lastError.Load() != "update status: refused" {
		t.Errorf("RecordFailure: errors %d, last %q", c.errors.Load(), *c.lastError.Load())
	}
}
