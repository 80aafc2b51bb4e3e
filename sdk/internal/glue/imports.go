package glue

import "github.com/setpoint-dev/setpoint/sdk/plugin"

// Imports are an ABI's host functions, one for each plugin.HostFunc. F is
// the shape the ABI's imports take.
type Imports[F any] struct {
	Log, Get, List, EmitEvent, Create, Update, Patch, Delete, HTTP F
}

// CallHost returns the plugin.CallHost that sends each request through
// call to the import for its plugin.HostFunc. A HostFunc beyond the table
// gets a nil answer.
func CallHost[F any](imports Imports[F], call func(fn F, req []byte) []byte) plugin.CallHost {
	table := [...]F{
		plugin.HostLog:       imports.Log,
		plugin.HostGet:       imports.Get,
		plugin.HostList:      imports.List,
		plugin.HostEmitEvent: imports.EmitEvent,
		plugin.HostCreate:    imports.Create,
		plugin.HostUpdate:    imports.Update,
		plugin.HostPatch:     imports.Patch,
		plugin.HostDelete:    imports.Delete,
		plugin.HostHTTP:      imports.HTTP,
	}
	return func(fn plugin.HostFunc, req []byte) []byte {
		if fn < 0 || int(fn) >= len(table) {
			return nil
		}
		return call(table[fn], req)
	}
}
