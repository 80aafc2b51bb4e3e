// Package guest is the native-ABI glue of the Go SDK (docs/ABI.md): the
// setpoint_* and handler exports (//go:wasmexport), the guest allocator the
// host writes input through, and the host-function imports of the
// "setpoint" module (//go:wasmimport). Register the plugin's handlers from
// an init function; outside wasip1 Register only records them, so the same
// main package also builds natively.
package guest

import (
	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// module is the guest's side of the calls; wasm.go gives it the imports.
var module = glue.New(callHost)

// Register makes hs the plugin's handlers.
func Register(hs plugin.Handlers) { module.Register(hs) }
