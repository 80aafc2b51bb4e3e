// Package glue is the part of the guest glue that the native ABI
// (sdk/guest) and the Extism ABI (sdk/extism) share: the registered
// handlers, the Host their handlers talk to, and the one path from an
// export call's input to its output (plugin.Handlers.Dispatch, with the
// output buffer reused across calls and the document size limit). Each
// ABI's package keeps only what differs between the ABIs: its exports and
// imports, and how input and output cross the module boundary.
package glue

import (
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Guest is a module's side of the calls. The zero value has no handlers
// and no host; a guest runs one call at a time, so it is not safe for
// concurrent use.
type Guest struct {
	handlers plugin.Handlers
	host     plugin.Host
	out      []byte // the output of the last call, reused by the next
}

// New returns a Guest whose handlers reach the host functions through
// call.
func New(call plugin.CallHost) *Guest { return &Guest{host: plugin.NewHost(call)} }

// Register makes hs the handlers. A plugin calls it (through its ABI's
// package) from an init function.
func (g *Guest) Register(hs plugin.Handlers) { g.handlers = hs }

// Bits reports the registered handlers as abi.Has* bits.
func (g *Guest) Bits() int32 { return g.handlers.Bits() }

// Call runs export on input and returns the response document, or a
// failure message with failed set. The result is valid until the next
// call.
func (g *Guest) Call(export string, input []byte) (out []byte, failed bool) {
	out, failed = g.handlers.Dispatch(g.host, export, input, g.out[:0])
	g.out = out
	if len(out) > abi.MaxDocumentLen {
		out, failed = append(out[:0], "plugin: output too large"...), true
	}
	return out, failed
}
