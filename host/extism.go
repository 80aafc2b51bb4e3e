package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	extism "github.com/extism/go-sdk"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/tetratelabs/wazero"
)

// extismRunner runs modules of the Extism ABI through extism/go-sdk, on a
// runtime configured like the native one (cache, memory cap, preemption).
type extismRunner struct {
	p        *Plugin
	compiled *extism.CompiledPlugin
	// cache is the runner's own compilation cache (on the host's cache dir,
	// or nil): closing an Extism plugin closes only its runtime, which
	// leaves the compiled modules in a shared cache's engine, so each
	// runner gets a cache it closes with it.
	cache wazero.CompilationCache
}

func newExtismRunner(ctx context.Context, p *Plugin, rcfg wazero.RuntimeConfig, wasm []byte, cacheDir string) (*extismRunner, error) {
	var cache wazero.CompilationCache
	if cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, err
		}
		cache = c
	}
	// Without a cache the runtime owns its engine and frees it on close.
	rcfg = rcfg.WithCompilationCache(cache)
	funcs := make([]extism.HostFunction, 0, len(hostFuncNames))
	for _, name := range hostFuncNames {
		f := extism.NewHostFunctionWithStack(name, func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
			s := scopeOf(ctx)
			if s == nil {
				panic(errors.New("host function called outside a plugin call"))
			}
			req, err := cp.ReadBytes(stack[0])
			if err != nil {
				panic(fmt.Errorf("host call %s: %w", name, err))
			}
			resp := s.handle(ctx, name, req)
			offs, err := cp.WriteBytes(resp)
			if err != nil {
				panic(fmt.Errorf("host call %s: %w", name, err))
			}
			stack[0] = offs
		}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
		f.SetNamespace(abi.ExtismUserModule)
		funcs = append(funcs, f)
	}
	funcs = append(funcs, traceFuncs()...)
	funcs = append(funcs, egressFuncs()...)
	manifest := extism.Manifest{
		Wasm:   []extism.Wasm{extism.WasmData{Data: routeTrace(wasm), Name: "main"}},
		Memory: &extism.ManifestMemory{MaxPages: p.cfg.Limits.MemoryPages, MaxVarBytes: maxVarBytes},
		// The host serves http_request itself, under the plugin's egress
		// grant (egress_extism.go); each call names the grant's hosts in
		// the instance's AllowedHosts.
		AllowedHosts: []string{},
	}
	// The kit's log functions (log_debug to log_error) reach the
	// instance's logger only at or above the SDK's process-wide level; the
	// logger routes what a guest logs to the plugin's log (see
	// newInstance). The level is debug, not trace: the SDK logs its runtime
	// detection at trace while it makes an instance, before the host can
	// set the instance's logger, to the standard library's log. log_trace
	// and get_log_level are served by the host instead (extismtrace.go).
	// The SDK keeps that level in one atomic per process, with no setting
	// per plugin; every runner stores the same constant, so there is
	// nothing for the host to own or to set only once.
	extism.SetLogLevel(extism.LogLevelDebug)
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{RuntimeConfig: rcfg, EnableWasi: true}, funcs)
	if err != nil {
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, err
	}
	return &extismRunner{p: p, compiled: compiled, cache: cache}, nil
}

func (r *extismRunner) close(ctx context.Context) {
	r.compiled.Close(ctx)
	if r.cache != nil {
		r.cache.Close(ctx)
	}
}

func (r *extismRunner) newInstance(parent context.Context) (instance, error) {
	out := &tailBuffer{}
	clock := &callClock{}
	mcfg := wazero.NewModuleConfig().
		WithStdout(r.p.guestOutput(out)).WithStderr(r.p.guestOutput(out)).
		WithSysWalltime().WithSysNanotime().WithNanosleep(clock.sleep).
		WithRandSource(rand.Reader)
	ctx, cancel := context.WithTimeout(parent, initTimeout(r.p.cfg.Limits))
	defer cancel()
	clock.done = ctx.Done()
	defer func() { clock.done = nil }()
	pl, err := r.compiled.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: mcfg})
	if err != nil {
		return nil, startFailed(parent, ctx, err, out, r.p.cfg.Limits)
	}
	in := &extismInstance{p: r.p, pl: pl, out: out, clock: clock}
	pl.SetLogger(in.log)
	return in, nil
}

// noConfig is the configuration of a call whose request has none; the SDK
// only reads it.
var noConfig = map[string]string{}

// maxVarBytes bounds what a guest keeps with var_set, per instance.
const maxVarBytes = 1 << 20

// extismInstance is one Extism plugin instance.
type extismInstance struct {
	p   *Plugin
	pl  *extism.Plugin
	out *tailBuffer
	enc []byte
	// scope is the call in progress, nil between calls; only the call's
	// goroutine reads and writes it.
	scope *callScope
	// clock is the guest's sleep, bound to the call in progress.
	clock *callClock
}

// log receives the kit's log functions (log_debug to log_error; log_trace
// is served by traceFuncs) and the SDK's own debug lines. A guest's lines
// go to the plugin's log like those of the log host function, and count in
// the host-call budget; the SDK's are dropped.
func (in *extismInstance) log(level extism.LogLevel, msg string) {
	s := in.scope
	if s == nil || level <= extism.LogLevelDebug && sdkDiagnostic(msg) {
		return
	}
	var l slog.Level
	switch level {
	case extism.LogLevelTrace, extism.LogLevelDebug:
		l = slog.LevelDebug
	case extism.LogLevelInfo:
		l = slog.LevelInfo
	case extism.LogLevelWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelError
	}
	s.guestLog(l, msg)
}

func (in *extismInstance) encodeBuffer() *[]byte { return &in.enc }

func (in *extismInstance) memoryBytes() uint64 { return uint64(in.pl.Memory().Size()) }

func (in *extismInstance) close(ctx context.Context) { in.pl.Close(ctx) }

func (in *extismInstance) describe(ctx context.Context) (int, int32, error) {
	// close-on-context-done stops a spinning guest at the deadline.
	ctx, cancel := context.WithTimeout(ctx, initTimeout(in.p.cfg.Limits))
	defer cancel()
	in.clock.done = ctx.Done()
	defer func() { in.clock.done = nil }()
	version := abi.Version // Extism kits that cannot declare one get the current version
	if in.pl.FunctionExists(abi.ExportVersion) {
		rc, _, err := in.pl.CallWithContext(ctx, abi.ExportVersion, nil)
		if err != nil {
			return 0, 0, err
		}
		version = int(int32(rc))
	}
	bits := handlerBitsOf(in.pl.FunctionExists(abi.ExportReconcile), in.pl.FunctionExists(abi.ExportAdmit), in.pl.FunctionExists(abi.ExportFinalize))
	if in.pl.FunctionExists(abi.ExportHandlers) {
		rc, _, err := in.pl.CallWithContext(ctx, abi.ExportHandlers, nil)
		if err != nil {
			return 0, 0, err
		}
		bits = int32(rc)
	}
	return version, bits, nil
}

func (in *extismInstance) call(ctx context.Context, export string, input []byte) ([]byte, error) {
	in.out.reset()
	// config_get serves the Plugin's spec.config, which the request
	// carries.
	s := scopeOf(ctx)
	in.scope = s
	if s != nil && s.config != nil {
		in.pl.Config = s.config
	} else {
		in.pl.Config = noConfig
	}
	in.pl.AllowedHosts = in.p.egress.get(in.p).extismHosts
	in.clock.done = ctx.Done()
	rc, out, err := in.pl.CallWithContext(ctx, export, input)
	in.scope, in.clock.done = nil, nil
	if err != nil {
		if ctx.Err() != nil || in.pl.Memory() == nil || isExit(err) || extismTrapped(err) {
			return nil, classify(ctx, err, in.out, in.p.cfg.Limits)
		}
		// The guest set an error with error_set: it fails the call whatever
		// the export returned (docs/ABI.md, What an export returns).
		return nil, &failure{err: ErrGuestPanic, detail: normalizeTrace(truncate(err.Error(), 2048)), keep: true}
	}
	if rc != 0 {
		return nil, &failure{err: ErrGuestPanic, detail: fmt.Sprintf("the guest returned %d without an error message", rc), keep: true}
	}
	if limit := in.p.cfg.Limits.MaxOutputBytes; len(out) > limit {
		return nil, &failure{err: ErrBadOutput, detail: fmt.Sprintf("output of %d bytes exceeds the limit of %d", len(out), limit)}
	}
	return out, nil
}

// extismTrapped reports whether an error of extism's CallWithContext comes
// from the runtime (a trap, or a host function that panicked) rather than
// from the guest's error_set. CallWithContext returns 1 for both; a
// runtime error carries wazero's "wasm stack trace" and wraps its cause,
// while the guest's message is a plain error.
func extismTrapped(err error) bool {
	return errors.Unwrap(err) != nil || strings.Contains(err.Error(), "\nwasm stack trace:")
}

// sdkDiagnostic reports whether a debug line is one extism/go-sdk logs
// itself around a call (runtime.go, extism.go).
func sdkDiagnostic(msg string) bool {
	for _, p := range []string{"Calling function : ", "Initializing runtime for ", "Calling _initialize",
		"Calling __wasm_call_ctors", "Calling hs_init", "Initialized Haskell language runtime."} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
