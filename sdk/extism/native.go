//go:build !wasip1

package extism

import "github.com/setpoint-dev/setpoint/sdk/plugin"

// callHost has no host to reach outside wasip1, where Register only
// records the handlers.
func callHost(plugin.HostFunc, []byte) []byte { return nil }
