package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

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
	manifest := extism.Manifest{
		Wasm:   []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		Memory: &extism.ManifestMemory{MaxPages: p.cfg.Limits.MemoryPages},
	}
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

func (r *extismRunner) newInstance(ctx context.Context) (instance, error) {
	out := &tailBuffer{}
	mcfg := wazero.NewModuleConfig().
		WithStdout(r.p.guestOutput(out)).WithStderr(r.p.guestOutput(out)).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().
		WithRandSource(rand.Reader)
	ctx, cancel := context.WithTimeout(ctx, initTimeout(r.p.cfg.Limits))
	defer cancel()
	pl, err := r.compiled.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: mcfg})
	if err != nil {
		return nil, classify(ctx, err, out, r.p.cfg.Limits)
	}
	pl.SetLogger(func(extism.LogLevel, string) {})
	return &extismInstance{p: r.p, pl: pl, out: out}, nil
}

// extismInstance is one Extism plugin instance.
type extismInstance struct {
	p   *Plugin
	pl  *extism.Plugin
	out *tailBuffer
	enc []byte
}

func (in *extismInstance) encodeBuffer() *[]byte { return &in.enc }

func (in *extismInstance) memoryBytes() uint64 { return uint64(in.pl.Memory().Size()) }

func (in *extismInstance) close(ctx context.Context) { in.pl.Close(ctx) }

func (in *extismInstance) describe(ctx context.Context) (int, int32, error) {
	// close-on-context-done stops a spinning guest at the deadline.
	ctx, cancel := context.WithTimeout(ctx, initTimeout(in.p.cfg.Limits))
	defer cancel()
	version := abi.Version // Extism kits that cannot declare one get the current version
	if in.pl.FunctionExists(abi.ExportVersion) {
		rc, _, err := in.pl.CallWithContext(ctx, abi.ExportVersion, nil)
		if err != nil {
			return 0, 0, err
		}
		version = int(int32(rc))
	}
	bits := handlerBitsOf(in.pl.FunctionExists(abi.ExportReconcile), in.pl.FunctionExists(abi.ExportAdmit), in.pl.FunctionExists(abi.ExportFinalize))
	if in.pl.FunctionExists("setpoint_handlers") {
		rc, _, err := in.pl.CallWithContext(ctx, "setpoint_handlers", nil)
		if err != nil {
			return 0, 0, err
		}
		bits = int32(rc)
	}
	return version, bits, nil
}

func (in *extismInstance) call(ctx context.Context, export string, input []byte) ([]byte, error) {
	in.out.reset()
	rc, out, err := in.pl.CallWithContext(ctx, export, input)
	if err != nil {
		if ctx.Err() != nil || in.pl.Memory() == nil || isExit(err) || rc == 0 {
			return nil, classify(ctx, err, in.out, in.p.cfg.Limits)
		}
		// The guest set an error with error_set and returned non-zero.
		return nil, &failure{err: ErrGuestPanic, detail: truncate(err.Error(), 2048), keep: true}
	}
	if rc != 0 {
		return nil, &failure{err: ErrGuestPanic, detail: fmt.Sprintf("the guest returned %d without an error message", rc), keep: true}
	}
	if limit := in.p.cfg.Limits.MaxOutputBytes; len(out) > limit {
		return nil, &failure{err: ErrBadOutput, detail: fmt.Sprintf("output of %d bytes exceeds the limit of %d", len(out), limit)}
	}
	return out, nil
}
