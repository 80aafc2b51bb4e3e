// Command requiredlabels is a validating admission plugin: it denies the
// creation or update of an object that lacks any of the labels listed in
// its config key "labels" (comma-separated). Build it with `make plugins`.
package main

import (
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Admit: Admit}) }

func main() {}
