// Command plugin is the Widget plugin: examples/widget/operator registered
// with the SDK's native-ABI glue. `make plugins` builds it to
// bin/wasm/widget-plugin.wasm:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o widget-plugin.wasm .
package main

import (
	"github.com/setpoint-dev/setpoint/examples/widget/operator"
	"github.com/setpoint-dev/setpoint/sdk/guest"
)

func init() {
	// A guest serves one call at a time and the SDK encodes each response
	// before the next call, so the operator may reuse its buffers.
	op := &operator.Operator{Reuse: true}
	guest.Register(op.Handlers())
}

func main() {}
