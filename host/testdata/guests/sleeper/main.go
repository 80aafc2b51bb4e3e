// Command sleeper is a guest whose reconcile sleeps for the duration its
// config "sleep" names (time.Sleep: WASI poll_oneoff) before it answers: a
// stuck guest, for the tests of what stopping, deleting and shutting down do
// while a call is in it.
package main

import (
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Reconcile: reconcile}) }

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	if d, err := time.ParseDuration(req.Config["sleep"]); err == nil {
		time.Sleep(d)
	}
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "slept").Bytes()}, nil
}

func main() {}
