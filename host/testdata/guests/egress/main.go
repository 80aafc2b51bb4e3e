// Command egress is the host tests' guest that calls the outside world
// through the http host function (native ABI); its logic is in package
// calls.
package main

import (
	"github.com/setpoint-dev/setpoint/host/testdata/guests/egress/calls"
	"github.com/setpoint-dev/setpoint/sdk/guest"
)

func init() { guest.Register(calls.Handlers) }

func main() {}
