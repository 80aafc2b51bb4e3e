// Command extismwriter is the writer guest on the Extism ABI, through the
// sdk/extism kit; its logic is in package writes.
package main

import (
	"github.com/setpoint-dev/setpoint/host/testdata/guests/writer/writes"
	"github.com/setpoint-dev/setpoint/sdk/extism"
)

func init() { extism.Register(writes.Handlers) }

func main() {}
