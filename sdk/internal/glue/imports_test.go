package glue_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// TestCallHost checks that each plugin.HostFunc reaches its own import
// and that one beyond the table gets no answer.
func TestCallHost(t *testing.T) {
	call := glue.CallHost(glue.Imports[string]{
		Log: "log", Get: "get", List: "list", EmitEvent: "emitEvent",
		Create: "create", Update: "update", Patch: "patch", Delete: "delete", HTTP: "http",
	}, func(name string, req []byte) []byte { return append([]byte(name+":"), req...) })
	for fn, want := range map[plugin.HostFunc]string{
		plugin.HostLog: "log:r", plugin.HostGet: "get:r", plugin.HostList: "list:r",
		plugin.HostEmitEvent: "emitEvent:r", plugin.HostCreate: "create:r",
		plugin.HostUpdate: "update:r", plugin.HostPatch: "patch:r", plugin.HostDelete: "delete:r",
		plugin.HostHTTP: "http:r",
	} {
		if got := string(call(fn, []byte("r"))); got != want {
			t.Errorf("call(%d) = %q, want %q", fn, got, want)
		}
	}
	for _, fn := range []plugin.HostFunc{plugin.HostHTTP + 1, -1} {
		if got := call(fn, []byte("r")); got != nil {
			t.Errorf("call(%d) = %q, want nil", fn, got)
		}
	}
}
