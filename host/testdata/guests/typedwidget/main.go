// Command typedwidget is the Widget reconcile logic of host/bench/widget
// written on the SDK's typed layer (widget.TypedReconcile), on the native
// ABI: the plugin benchmarks compare it with the raw-API guest (widget).
package main

import (
	"github.com/setpoint-dev/setpoint/host/bench/widget"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() {
	guest.Register(plugin.Handlers{Reconcile: widget.TypedReconcile})
}

func main() {}
