// Command defaults is a mutating admission plugin: on create and update it
// adds the labels and annotations its config names ("labels.<key>" and
// "annotations.<key>" = value) where the object lacks them, as an RFC 6902
// JSON patch. Build it with `make plugins`.
package main

import (
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Admit: Admit}) }

func main() {}
