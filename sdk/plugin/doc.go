// Package plugin is the ABI-independent part of the Go SDK for Setpoint
// plugins: the Host a handler talks to, the handler types, and Dispatch,
// which decodes a request, runs a handler and encodes its response.
//
// A plugin is a main package that registers its handlers with the glue of
// the ABI it targets, in an init function — sdk/guest for Setpoint's native
// ABI (the fast path), sdk/extism for the Extism ABI:
//
//	func init() {
//		guest.Register(plugin.Handlers{Reconcile: reconcile, Admit: admit})
//	}
//
//	func main() {}
//
// and is built with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my.wasm .
//
// Handlers are plain Go functions of a Host and a typed request from
// sdk/abi, so plugin logic is unit-tested natively with `go test` (see
// sdk/plugintest for a Host that records what the plugin did); this package
// has no Wasm code at all.
//
// The glue reuses its input and output buffers across calls: RawJSON members
// of a request alias the input buffer and are valid only until the handler
// returns; copy what must outlive the call.
package plugin
