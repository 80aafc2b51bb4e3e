package host

import (
	"context"
	"fmt"
	"log/slog"

	extism "github.com/extism/go-sdk"
)

// traceModule is the namespace the host serves an Extism guest's log_trace
// and get_log_level from. extism/go-sdk serves both from extism:host/env
// against one process-wide level, which the host keeps at debug (the SDK
// logs its own trace lines to the standard library's log before the host
// can give an instance its logger): at that level log_trace is dropped and
// get_log_level tells kits that check it to skip their trace lines. The
// host renames those two imports of a copy of the module, in place, to
// this namespace of the same length, and serves them itself: trace lines
// reach the plugin's log at debug level.
const traceModule = "setpoint:tracer"

func init() {
	if len(traceModule) != len(extismEnv) {
		panic("traceModule must be as long as extismEnv: the imports are renamed in place")
	}
}

// tracedImports are the extism:host/env imports the host serves itself,
// each with the namespace it is renamed to: traceModule, and egressModule
// (egress_extism.go).
var tracedImports = map[string]string{"log_trace": traceModule, "get_log_level": traceModule,
	"http_request": egressModule, "http_status_code": egressModule, "http_headers": egressModule}

// routeTrace returns wasm with its imports of extism:host/env's functions
// that tracedImports lists renamed to their namespace; wasm itself is not
// changed. A
// module with neither import, or one the reader cannot follow, comes back
// as it is (the compiler has accepted it already).
func routeTrace(wasm []byte) []byte {
	if len(wasm) < 8 {
		return wasm
	}
	type rename struct {
		at int    // the offset of the module name
		to string // the namespace
	}
	var at []rename
	r := reader{b: wasm, i: 8}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		size := int(r.u32())
		start := r.i
		r.bytes(size)
		if id != 2 || r.err != nil {
			continue
		}
		ir := reader{b: wasm[:start+size], i: start}
		n := ir.u32()
		for i := uint32(0); i < n && ir.err == nil; i++ {
			ml := int(ir.u32())
			mAt := ir.i
			m := ir.bytes(ml)
			name := ir.bytes(int(ir.u32()))
			if to, ok := tracedImports[string(name)]; ok && string(m) == extismEnv {
				at = append(at, rename{mAt, to})
			}
			switch ir.byte() {
			case 0x00:
				ir.u32()
			case 0x01:
				ir.byte()
				ir.limitsMin()
			case 0x02:
				ir.limitsMin()
			case 0x03:
				ir.byte()
				ir.byte()
			default:
				ir.fail()
			}
		}
		if ir.err != nil {
			return wasm
		}
		break
	}
	if len(at) == 0 {
		return wasm
	}
	out := append([]byte(nil), wasm...)
	for _, r := range at {
		copy(out[r.at:], r.to)
	}
	return out
}

// traceFuncs serve the renamed imports.
func traceFuncs() []extism.HostFunction {
	logTrace := extism.NewHostFunctionWithStack("log_trace", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
		s := scopeOf(ctx)
		msg, err := cp.ReadString(stack[0])
		if err != nil {
			panic(fmt.Errorf("log_trace: %w", err))
		}
		cp.Free(stack[0])
		if s != nil {
			s.guestLog(slog.LevelDebug, msg)
		}
	}, []extism.ValueType{extism.ValueTypeI64}, nil)
	logTrace.SetNamespace(traceModule)
	// get_log_level answers trace: every line a guest logs is kept.
	getLevel := extism.NewHostFunctionWithStack("get_log_level", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
		stack[0] = uint64(uint32(extism.LogLevelTrace.ExtismCompat()))
	}, nil, []extism.ValueType{extism.ValueTypeI32})
	getLevel.SetNamespace(traceModule)
	return []extism.HostFunction{logTrace, getLevel}
}

// guestLog writes a line a guest logged through an Extism kit to the
// plugin's log; it counts in the host-call budget like the log host
// function.
func (s *callScope) guestLog(level slog.Level, msg string) {
	s.calls++
	if s.calls > s.p.cfg.Limits.MaxHostCalls {
		panic(errBudget)
	}
	s.logLine(context.Background(), level, msg, nil)
}
