// Command sysfields is a hostile mutating admission guest for the tests:
// on create and update it patches the server-owned metadata of the object
// (uid to its config's "uid", creationTimestamp, deletionTimestamp,
// deletionGracePeriodSeconds, resourceVersion, generation) and adds the
// label mutated=yes, so a test can see that it ran and that the server put
// its own values back. Build it with `make plugins`.
package main

import (
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Admit: admit}) }

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Operation == abi.Delete {
		return &abi.AdmissionResponse{Allowed: true}, nil
	}
	uid := req.Config["uid"]
	if uid == "" {
		uid = "00000000-0000-0000-0000-000000000000"
	}
	patch := `[` +
		`{"op":"add","path":"/metadata/uid","value":"` + uid + `"},` +
		`{"op":"add","path":"/metadata/creationTimestamp","value":"2001-01-01T00:00:00Z"},` +
		`{"op":"add","path":"/metadata/deletionTimestamp","value":"2001-01-02T00:00:00Z"},` +
		`{"op":"add","path":"/metadata/deletionGracePeriodSeconds","value":0},` +
		`{"op":"add","path":"/metadata/resourceVersion","value":"1"},` +
		`{"op":"add","path":"/metadata/generation","value":99},`
	if req.Object.Has("metadata", "labels") {
		patch += `{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`
	} else {
		patch += `{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`
	}
	return &abi.AdmissionResponse{Allowed: true, Patch: []byte(patch)}, nil
}

func main() {}
