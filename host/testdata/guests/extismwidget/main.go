// Command extismwidget is the same guest as widget on the Extism ABI: the Widget reconcile
// logic of host/bench/widget, an admission handler that requires spec.name
// and a finalize handler that reports done, through the sdk/extism kit.
package main

import (
	"github.com/setpoint-dev/setpoint/host/bench/widget"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/extism"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() {
	extism.Register(plugin.Handlers{Reconcile: reconcile, Admit: admit, Finalize: finalize})
}

// reconcile misbehaves when config "mode" says so (loop, panic), for the
// host's failure tests on the Extism path; otherwise it is widget's.
func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	switch req.Config["mode"] {
	case "loop":
		for n := 0; ; n++ {
		}
	case "panic":
		panic("extism guest panic")
	}
	return widget.Reconcile(h, req)
}

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Operation != abi.Delete && !req.Object.Has("spec", "name") {
		return &abi.AdmissionResponse{Message: "spec.name is required", Code: 422}, nil
	}
	return &abi.AdmissionResponse{Allowed: true}, nil
}

func finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return &abi.FinalizeResponse{Done: true}, nil
}

func main() {}
