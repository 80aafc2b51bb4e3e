package host_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A version loaded to check a module takes a plugin's name and permissions
// when its limits are the plugin's, and serves as that plugin; with other
// limits it stays as it was.
func TestAdopt(t *testing.T) {
	cm := abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"default"},"data":{"a":"b"}}`)
	logs, evs := newRecords(), &events{}
	h := hosttest.NewHost(t, host.Options{Logger: slog.New(logs), Objects: objects{[]abi.RawJSON{cm}}, Events: evs})
	ctx := context.Background()
	wasm := hosttest.Module(t, "faulty")
	req := &abi.ReconcileRequest{Object: abi.RawJSON(widgetObj), Config: map[string]string{
		"mode": "get", "apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cfg"}}

	checked, err := h.Load(ctx, "upload", wasm, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer checked.Close()
	// As checked, with no permissions, the guest's read is denied.
	if resp, err := checked.Reconcile(ctx, req); err != nil || !strings.Contains(resp.Error, `plugin "upload" may not read ConfigMap`) {
		t.Fatalf("before Adopt: %v %q", err, resp.Error)
	}
	if checked.Adopt("reader", host.Config{Limits: host.Limits{CallTimeout: 5 * time.Second}}) {
		t.Fatal("Adopt with another call timeout succeeded")
	}
	if checked.Name() != "upload" {
		t.Fatalf("a refused Adopt renamed the version to %q", checked.Name())
	}
	perms := host.Permissions{Read: []string{"ConfigMap"}, Events: true}
	if !checked.Adopt("reader", host.Config{Permissions: perms, Limits: host.Limits{CallTimeout: time.Second}}) {
		t.Fatal("Adopt with the default limits spelled out failed")
	}
	resp, err := checked.Reconcile(ctx, req)
	if err != nil || resp.Error != "" || !resp.Status.Bool("found") {
		t.Fatalf("after Adopt: %v %q %s", err, resp.Error, resp.Status)
	}
	if checked.Name() != "reader" || len(evs.got) == 0 || evs.got[len(evs.got)-1].plugin != "reader" {
		t.Fatalf("name %q, events %+v: want the adopted name", checked.Name(), evs.got)
	}
	found := false
	for _, m := range *logs.got {
		if m["msg"] == "plugin log" && m["plugin"] == "reader" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no plugin log under the adopted name: %v", *logs.got)
	}
}
