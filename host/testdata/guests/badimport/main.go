// Command badimport imports a host function the host does not offer; the
// host must refuse it naming the import.
package main

import (
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

//go:wasmimport setpoint launch_missiles
func launchMissiles(n int32) int32

func init() {
	guest.Register(plugin.Handlers{Reconcile: func(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		launchMissiles(1)
		return &abi.ReconcileResponse{}, nil
	}})
}

func main() {}
