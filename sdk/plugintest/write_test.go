package plugintest_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

const cm = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"a":"1"}}`

var cmRef = abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c"}

// TestWriteLifecycle drives an object through every write a plugin can make
// and checks what Get then serves and what each write answers.
func TestWriteLifecycle(t *testing.T) {
	h := &plugintest.Host{}
	get := func() abi.RawJSON {
		t.Helper()
		obj, found, err := h.Get(abi.GetRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c"})
		if err != nil || !found {
			t.Fatalf("Get = %v, %v", found, err)
		}
		return obj
	}

	created, err := plugin.Create(h, abi.RawJSON(cm))
	if err != nil || created.String("metadata", "uid") == "" || created.String("metadata", "resourceVersion") == "" {
		t.Fatalf("Create = %s, %v", created, err)
	}
	if _, err := plugin.Create(h, abi.RawJSON(cm)); !plugin.IsAlreadyExists(err) {
		t.Errorf("second Create = %v, want AlreadyExists", err)
	}

	// An update with the resourceVersion it read succeeds once; the second
	// carries a stale one.
	var m map[string]any
	if err := json.Unmarshal(created, &m); err != nil {
		t.Fatal(err)
	}
	m["data"] = map[string]any{"a": "2"}
	stale, _ := json.Marshal(m)
	if _, err := plugin.Update(h, stale); err != nil {
		t.Fatalf("Update = %v", err)
	}
	if _, err := plugin.Update(h, stale); !plugin.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion = %v, want Conflict", err)
	}
	// An update must say which version it replaces, as on the server.
	delete(m["metadata"].(map[string]any), "resourceVersion")
	blind, _ := json.Marshal(m)
	var we *plugin.WriteError
	if _, err := plugin.Update(h, blind); !errors.As(err, &we) || we.Code != 422 || !strings.Contains(we.Message, "metadata.resourceVersion") {
		t.Errorf("Update without a resourceVersion = %v, want Invalid on metadata.resourceVersion", err)
	}
	if got := get().String("data", "a"); got != "2" {
		t.Errorf("after Update data.a = %q", got)
	}

	// Status writes touch only the status; object writes keep it.
	if _, err := plugin.PatchStatus(h, cmRef, []byte(`{"status":{"state":"Ready"},"data":{"a":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	if o := get(); o.String("status", "state") != "Ready" || o.String("data", "a") != "2" {
		t.Errorf("after PatchStatus: %s", o)
	}
	if _, err := plugin.Patch(h, cmRef, []byte(`{"data":{"a":null,"b":"3"},"status":{"state":"Gone"}}`)); err != nil {
		t.Fatal(err)
	}
	if o := get(); o.String("data", "b") != "3" || o.String("data", "a") != "" || o.String("status", "state") != "Ready" {
		t.Errorf("after Patch: %s", o)
	}
	if _, err := plugin.UpdateStatus(h, abi.RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","resourceVersion":"`+
		get().String("metadata", "resourceVersion")+`"},"status":{"state":"Done"}}`)); err != nil {
		t.Fatal(err)
	}
	if o := get(); o.String("status", "state") != "Done" || o.String("data", "b") != "3" {
		t.Errorf("after UpdateStatus: %s", o)
	}

	if err := plugin.Delete(h, abi.ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: "c", UID: "other"}); !plugin.IsConflict(err) {
		t.Errorf("Delete with a wrong UID precondition = %v, want Conflict", err)
	}
	if err := plugin.Delete(h, cmRef); err != nil {
		t.Fatal(err)
	}
	if err := plugin.Delete(h, cmRef); !plugin.IsNotFound(err) {
		t.Errorf("second Delete = %v, want NotFound", err)
	}
	if _, err := plugin.Patch(h, cmRef, []byte(`{}`)); !plugin.IsNotFound(err) {
		t.Errorf("Patch of a deleted object = %v, want NotFound", err)
	}
	if n := len(h.Writes); n != 12 { // failed writes are recorded too
		t.Errorf("recorded %d writes, want 12", n)
	}
}

// TestDenyWrite checks that a denied kind reaches the plugin as Forbidden and
// leaves nothing behind.
func TestDenyWrite(t *testing.T) {
	h := &plugintest.Host{DenyWrite: func(kind string) error {
		if kind == "Secret" {
			return errString("may not write " + kind)
		}
		return nil
	}}
	_, err := plugin.Create(h, abi.RawJSON(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`))
	if !plugin.IsForbidden(err) {
		t.Fatalf("Create of a denied kind = %v, want Forbidden", err)
	}
	if _, found, _ := h.Get(abi.GetRequest{Kind: "Secret", Name: "s"}); found {
		t.Error("a denied create was stored")
	}
	if len(h.Writes) != 1 || h.Writes[0].Func != plugin.HostCreate || h.Writes[0].Err == nil {
		t.Errorf("Writes = %+v", h.Writes)
	}
	if _, err := plugin.Create(h, abi.RawJSON(cm)); err != nil {
		t.Errorf("Create of an allowed kind = %v", err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
