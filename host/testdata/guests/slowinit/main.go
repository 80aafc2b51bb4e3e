// Command slowinit is a native-ABI guest whose initialization takes half a
// second (a sleep in init, as a guest that loads tables or warms a cache
// at start would take), longer than a short call deadline; its admit
// handler allows at once. The host's tests use it to show that an
// instance a call starts runs under the instance-start budget, not the
// call's deadline.
package main

import (
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// InitDelay is how long the guest's initialization takes.
const InitDelay = 500 * time.Millisecond

func init() {
	time.Sleep(InitDelay)
	guest.Register(plugin.Handlers{Admit: admit})
}

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return &abi.AdmissionResponse{Allowed: true}, nil
}

func main() {}
