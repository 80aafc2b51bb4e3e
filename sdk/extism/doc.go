// Package extism is a minimal Extism-ABI kit for Go guests built with the
// standard toolchain (no TinyGo, no go-pdk): it declares the
// extism:host/env imports itself, exports the same handlers as the native
// ABI (reconcile, admit, finalize, each `() -> i32`), reads the input and
// writes the output through Extism's kernel memory, and reaches Setpoint's
// host functions in extism:host/user. It exists so that the Extism path of
// the host is tested with a module built from source in this repository;
// authors of other languages use their own Extism kit with the same JSON
// documents (docs/ABI.md).
package extism

import (
	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// module is the guest's side of the calls; wasm.go gives it the imports.
var module = glue.New(callHost)

// Register makes hs the plugin's handlers.
func Register(hs plugin.Handlers) { module.Register(hs) }
