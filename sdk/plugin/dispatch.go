package plugin

import (
	"runtime/debug"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Dispatch runs one export against the handlers: it decodes
// input, calls the handler and appends the encoded response to out. When
// the call fails outside the handler's own error reporting (bad input, no
// handler, a panic) it appends a failure message instead and returns
// failed. The ABI glue (sdk/guest, sdk/extism) calls it; it is exported so
// that the whole path, codec included, can be tested and benchmarked
// natively. The request a handler receives is reused by the next call, like
// the input it aliases. Dispatch is not safe for concurrent use (a guest
// serves one call at a time).
func (hs *Handlers) Dispatch(h Host, export string, input, out []byte) (result []byte, failed bool) {
	defer func() {
		if r := recover(); r != nil {
			result, failed = appendPanic(out[:0], r), true
		}
	}()
	switch export {
	case abi.ExportReconcile:
		if hs.Reconcile == nil {
			return append(out, "plugin: no reconcile handler registered"...), true
		}
		req := &hs.scratch.reconcile
		if err := req.DecodeAliased(input); err != nil {
			return append(out, "plugin: reading reconcile request: "+err.Error()...), true
		}
		resp, err := hs.Reconcile(h, req)
		if resp == nil {
			resp = &abi.ReconcileResponse{}
		}
		if err != nil {
			resp.Error, resp.Terminal = err.Error(), resp.Terminal || isTerminal(err)
		}
		return resp.AppendJSON(out), false
	case abi.ExportAdmit:
		if hs.Admit == nil {
			return append(out, "plugin: no admit handler registered"...), true
		}
		req := &hs.scratch.admit
		if err := req.DecodeAliased(input); err != nil {
			return append(out, "plugin: reading admission request: "+err.Error()...), true
		}
		resp, err := hs.Admit(h, req)
		if err != nil {
			// A handler error denies the request with its message; the
			// failurePolicy applies only to failures of the module itself.
			resp = &abi.AdmissionResponse{Allowed: false, Message: err.Error()}
		}
		if resp == nil {
			resp = &abi.AdmissionResponse{Allowed: true}
		}
		return resp.AppendJSON(out), false
	case abi.ExportFinalize:
		if hs.Finalize == nil {
			return append(out, "plugin: no finalize handler registered"...), true
		}
		req := &hs.scratch.finalize
		if err := req.DecodeAliased(input); err != nil {
			return append(out, "plugin: reading finalize request: "+err.Error()...), true
		}
		resp, err := hs.Finalize(h, req)
		if resp == nil {
			resp = &abi.FinalizeResponse{}
		}
		if err != nil {
			resp.Error, resp.Terminal = err.Error(), resp.Terminal || isTerminal(err)
		}
		return resp.AppendJSON(out), false
	}
	return append(out, "plugin: unknown export "+export...), true
}

func isTerminal(err error) bool {
	for err != nil {
		if _, ok := err.(terminalError); ok {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// appendPanic formats a recovered panic with the top of its stack.
func appendPanic(b []byte, r any) []byte {
	b = append(b, "panic: "...)
	switch v := r.(type) {
	case error:
		b = append(b, v.Error()...)
	case string:
		b = append(b, v...)
	default:
		b = append(b, "non-error value"...)
	}
	stack := string(debug.Stack())
	// Keep the frames below the panic, bounded.
	if i := strings.Index(stack, "panic("); i >= 0 {
		stack = stack[i:]
	}
	if len(stack) > 1024 {
		stack = stack[:1024]
	}
	return append(append(b, '\n'), stack...)
}
