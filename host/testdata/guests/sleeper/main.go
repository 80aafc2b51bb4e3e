// Command sleeper is a native-ABI guest whose reconcile handler sleeps for
// the request's config "sleep" (time.Sleep, which the Go runtime turns into
// WASI poll_oneoff) and then reports status.state "awake"; its admit handler
// sleeps the same. The host's tests use it to show that a sleep does not
// outlast the call's deadline, the end-to-end tests as a stuck guest while a
// Plugin is deleted or the server shuts down.
package main

import (
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() {
	guest.Register(plugin.Handlers{Reconcile: reconcile, Admit: admit})
}

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	d, _ := time.ParseDuration(req.Config["sleep"])
	time.Sleep(d)
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "awake").Bytes()}, nil
}

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	d, _ := time.ParseDuration(req.Config["sleep"])
	time.Sleep(d)
	return &abi.AdmissionResponse{Allowed: true}, nil
}

func main() {}
