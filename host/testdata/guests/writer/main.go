// Command writer is the host tests' guest that writes objects through the
// host's write functions (native ABI); its logic is in package writes.
package main

import (
	"github.com/setpoint-dev/setpoint/host/testdata/guests/writer/writes"
	"github.com/setpoint-dev/setpoint/sdk/guest"
)

func init() { guest.Register(writes.Handlers) }

func main() {}
