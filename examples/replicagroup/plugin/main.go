// Command plugin is the ReplicaGroup plugin: examples/replicagroup/operator
// registered with the SDK's native-ABI glue. `make plugins` builds it to
// bin/wasm/replicagroup-plugin.wasm.
package main

import (
	"github.com/setpoint-dev/setpoint/examples/replicagroup/operator"
	"github.com/setpoint-dev/setpoint/sdk/guest"
)

func init() { guest.Register(operator.Handlers()) }

func main() {}
