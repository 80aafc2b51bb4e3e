// Command inittrap is a version whose init panics: the host must refuse it and leave the version serving before it in place.
// It labels what it does with its version, v2.
package main

import (
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

const version = "v2"

func init() { guest.Register(plugin.Handlers{Reconcile: reconcile, Admit: admit, Finalize: finalize}) }

func init() {
	panic("inittrap: init fails on purpose")
}

// reconcile reports which version reconciled the object.
func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "reconciled by "+version).Bytes()}, nil
}

// admit denies an object labelled deny, naming the version.
func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Object.String("metadata", "labels", "deny") != "" {
		return &abi.AdmissionResponse{Code: 422, Message: "denied by " + version}, nil
	}
	return &abi.AdmissionResponse{Allowed: true}, nil
}

// finalize is done at once.
func finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return &abi.FinalizeResponse{Done: true}, nil
}

func main() {}
