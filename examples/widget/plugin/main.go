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
	op := &operator.Operator{}
	guest.Register(op.Handlers())
}

func main() {}
