// Package plugin is the Go SDK for Setpoint plugins. A plugin is a main
// package that registers its handlers in an init function:
//
//	func init() {
//		plugin.HandleReconcile(reconcile)
//		plugin.HandleAdmit(admit)
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
// sdk/plugintest for a Host that records what the plugin did). Only the Wasm
// glue (wasm.go, built for wasip1) touches the native ABI: the exports, the
// guest allocator and the host-function imports described in docs/ABI.md.
//
// The glue reuses its input and output buffers across calls: RawJSON members
// of a request alias the input buffer and are valid only until the handler
// returns; copy what must outlive the call.
package plugin
