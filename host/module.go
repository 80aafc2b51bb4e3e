package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// ABI is the guest ABI a module speaks.
type ABI int

const (
	// NativeABI is Setpoint's own ABI (sdk/guest): input written straight
	// into guest memory through the guest's allocator.
	NativeABI ABI = iota + 1
	// ExtismABI is the ABI of modules importing extism:host/env, run
	// through extism/go-sdk.
	ExtismABI
)

func (a ABI) String() string {
	switch a {
	case NativeABI:
		return "native"
	case ExtismABI:
		return "extism"
	}
	return "unknown"
}

// supportedVersions are the ABI versions this host runs.
var supportedVersions = []int{abi.Version}

const extismEnv = "extism:host/env"

// extismEnvFuncs are the kernel functions extism/go-sdk provides.
var extismEnvFuncs = []string{
	"alloc", "free", "load_u8", "input_load_u8", "store_u64", "store_u8", "input_set", "output_set",
	"input_length", "input_offset", "output_length", "output_offset", "length", "length_unsafe", "reset",
	"error_set", "error_get", "memory_bytes", "input_load_u64", "load_u64", "config_get", "var_get", "var_set",
	"http_request", "http_status_code", "http_headers", "get_log_level",
	"log_trace", "log_debug", "log_info", "log_warn", "log_error",
}

// hostFuncNames are the host functions of both ABIs, in the order listed
// in errors.
var hostFuncNames = []string{abi.HostLog, abi.HostGet, abi.HostList, abi.HostEmitEvent,
	abi.HostCreate, abi.HostUpdate, abi.HostPatch, abi.HostDelete, abi.HostHTTP}

// Digest returns the content address of a module: "sha256:" and the hex
// digest of its bytes.
func Digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Load compiles and checks a module and returns it as a plugin version
// ready to call, with one warm instance. name identifies the plugin in
// errors and logs. A module that cannot run here gives a *ModuleError
// wrapping ErrInvalidModule, ErrMissingExport, ErrUnknownImport,
// ErrUnsupportedABI or ErrMemoryLimit, with a message that says what is
// wrong.
func (h *Host) Load(ctx context.Context, name string, wasm []byte, cfg Config) (*Plugin, error) {
	return h.LoadDigest(ctx, name, wasm, Digest(wasm), cfg)
}

// LoadDigest is Load for a caller that holds the module's digest already,
// having computed it from wasm or checked wasm against it (an upload, a
// module read back from the store): hashing a 3 MB module takes
// milliseconds. digest must be Digest(wasm): the host keys what it derives
// from a module (its instrumented form, its compiled mark) by it.
func (h *Host) LoadDigest(ctx context.Context, name string, wasm []byte, digest string, cfg Config) (*Plugin, error) {
	p, err := h.load(ctx, name, wasm, digest, cfg, true)
	var fail *interpreterFailed
	if errors.As(err, &fail) {
		// What fails on the interpreter loads as it always did, compiled:
		// a refusal is then the compiler's, and so is its message.
		h.opts.Logger.Debug("module failed to load on the interpreter; compiling it", "plugin", name, "err", fail.err.Error())
		return h.load(ctx, name, wasm, digest, cfg, false)
	}
	return p, err
}

// load is Load, on the interpreter first when mayInterpret and the host
// says so (tier.go); a failure past that choice is then an
// *interpreterFailed.
func (h *Host) load(ctx context.Context, name string, wasm []byte, digest string, cfg Config, mayInterpret bool) (*Plugin, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cfg.Limits = h.limits(cfg.Limits)
	p := &Plugin{name: name, digest: digest, host: h, cfg: cfg, log: h.opts.Logger.With("plugin", name), done: make(chan struct{})}
	refuse := func(err error, format string, args ...any) error {
		return &ModuleError{Plugin: name, Err: err, Detail: fmt.Sprintf(format, args...)}
	}

	if err := h.opts.Budget.check(cfg.Limits); err != nil {
		return nil, refuse(ErrOverBudget, "%v", err)
	}
	if err := checkCounts(wasm); err != nil {
		return nil, refuse(ErrInvalidModule, "%v", err)
	}
	// Bounded work before the compiler sees untrusted bytes: the shape of
	// the module, then a compile slot and memory, then a compile that the
	// deadline and the caller's cancellation stop between functions.
	shape, err := vetModule(wasm, h.opts.Vet)
	if err != nil {
		return nil, refuse(ErrInvalidModule, "%v", err)
	}
	if shape.MemoryMin > int64(cfg.Limits.MemoryPages) {
		return nil, refuse(ErrMemoryLimit, "the module's initial memory of %d pages is over limit of %d pages (memoryPages)", shape.MemoryMin, cfg.Limits.MemoryPages)
	}
	ctx, cancelCompile := context.WithTimeoutCause(ctx, h.opts.CompileTimeout,
		fmt.Errorf("compiling the module took longer than %v (--plugin-compile-timeout)", h.opts.CompileTimeout))
	defer cancelCompile()
	estimate := compileEstimate(shape)
	enter, err := h.gate.enter(ctx, estimate)
	if err != nil {
		return nil, refuse(ErrInvalidModule, "%v", err)
	}
	release := sync.OnceFunc(enter)
	defer release()
	abiKind := NativeABI
	if importsModule(wasm, extismEnv) {
		abiKind = ExtismABI
	}
	// A module not compiled before may start on the interpreter and move
	// to compiled code in the background (tier.go).
	first := mayInterpret && h.interpreterFirst(p.digest, shape)
	// Native-ABI modules get the host's own cheap preemption checks (see
	// preempt.go); others, and modules the rewriter cannot read, rely on
	// wazero's close-on-context-done. The interpreter runs the module as
	// uploaded (its calls stop by close-on-context-done), so on the way
	// to it the rewrite runs beside its compile and is waited for only
	// before the compiled runtime's settings are chosen.
	code := wasm
	instrumented := func() {}
	if abiKind == NativeABI && !cfg.DisablePreemption {
		var inst []byte
		var instErr error
		apply := func() {
			if instErr == nil {
				code, p.ownPreemption = inst, true
				return
			}
			p.preemptReason = strings.TrimPrefix(instErr.Error(), errUninstrumentable.Error()+": ")
			p.log.Info("plugin preempted by wazero, the slower path", "reason", p.preemptReason)
		}
		if first {
			done := make(chan struct{})
			go func() {
				defer close(done)
				inst, instErr = h.instrumentCached(p.digest, wasm)
			}()
			instrumented = sync.OnceFunc(func() {
				<-done
				apply()
			})
			defer instrumented()
		} else {
			inst, instErr = h.instrumentCached(p.digest, wasm)
			apply()
		}
	}
	runtimeConfig := func() wazero.RuntimeConfig {
		return wazero.NewRuntimeConfig().
			WithCompilationCache(h.cache).
			WithCloseOnContextDone(!cfg.DisablePreemption && !p.ownPreemption).
			WithMemoryLimitPages(cfg.Limits.MemoryPages).
			WithCustomSections(true)
	}
	// instCtx bounds the first instance: on the interpreter, a module whose
	// start takes longer than interpreterStartBudget loads compiled.
	instCtx := ctx
	var loadCfg wazero.RuntimeConfig
	cacheDir := h.opts.CacheDir
	if !first {
		loadCfg = runtimeConfig()
	} else {
		loadCfg, cacheDir = interpreterConfig(cfg), ""
		compiledRefusal := refuse
		refuse = func(err error, format string, args ...any) error {
			return &interpreterFailed{err: compiledRefusal(err, format, args...)}
		}
		var cancel context.CancelFunc
		instCtx, cancel = context.WithTimeout(ctx, interpreterStartBudget)
		defer cancel()
	}
	rt := wazero.NewRuntimeWithConfig(ctx, loadCfg)
	// Functions compile in parallel, one worker per core, and at least two:
	// only the parallel compiler stops when ctx is done.
	ctx = experimental.WithCompilationWorkers(ctx, max(2, runtime.GOMAXPROCS(0)))
	loadCode := code
	if first {
		loadCode = wasm
	}
	compiled, err := compileModule(ctx, rt, loadCode)
	if err == nil && ctx.Err() != nil {
		compiled.Close(ctx)
		compiled, err = nil, ctx.Err()
	}
	if err != nil {
		rt.Close(ctx)
		if ctx.Err() != nil {
			return nil, refuse(ErrInvalidModule, "compile stopped: %v", context.Cause(ctx))
		}
		if strings.Contains(err.Error(), "over limit") || strings.Contains(err.Error(), "memory") && strings.Contains(err.Error(), "limit") {
			return nil, refuse(ErrMemoryLimit, "%v", err)
		}
		return nil, refuse(ErrInvalidModule, "%v", err)
	}
	// The compilation cache shares wazero's engine between runtimes, so
	// closing a runtime leaves its compiled code in the engine: a module
	// compiled here must be closed on its own (a refused one here, a loaded
	// one by its runner), or every load keeps its code for good.
	discard := func() {
		rt.Close(ctx)
		compiled.Close(ctx)
	}
	if mem, ok := compiled.ExportedMemories()["memory"]; !ok {
		discard()
		return nil, refuse(ErrMissingExport, "the module exports no memory named \"memory\"")
	} else if mem.Min() > cfg.Limits.MemoryPages {
		discard()
		return nil, refuse(ErrMemoryLimit, "initial memory of %d pages exceeds the limit of %d pages", mem.Min(), cfg.Limits.MemoryPages)
	}
	if err := checkImports(compiled, abiKind); err != nil {
		discard()
		return nil, refuse(ErrUnknownImport, "%v", err)
	}
	if err := checkExports(compiled, abiKind); err != nil {
		discard()
		return nil, refuse(ErrMissingExport, "%v", err)
	}
	declared, hasSection, err := versionSection(compiled)
	if err != nil {
		discard()
		return nil, refuse(ErrUnsupportedABI, "%v", err)
	}

	var r runner
	switch abiKind {
	case NativeABI:
		var nr *nativeRunner
		if nr, err = newNativeRunner(ctx, p, rt, compiled); err != nil {
			compiled.Close(ctx) // newNativeRunner closed rt
		} else {
			nr.ownPreemption = nr.ownPreemption && !first
			r = nr
		}
	case ExtismABI:
		discard()
		r, err = newExtismRunner(ctx, p, loadCfg, wasm, cacheDir)
	}
	release() // compiled: what follows is bounded by the instance's limits
	if err != nil {
		return nil, refuse(ErrInvalidModule, "%v", err)
	}
	p.abi = abiKind
	p.pool = newPool(p, r)

	// A first instance proves the module initializes within its limits and
	// reports its version and handlers; it stays in the pool, warm.
	inst, err := p.pool.get(instCtx)
	if err != nil {
		p.pool.close()
		var ce *CallError
		if errors.As(err, &ce) {
			return nil, refuse(ce.Err, "starting an instance: %s", ce.Detail)
		}
		return nil, refuse(ErrInvalidModule, "starting an instance: %v", err)
	}
	version, handlers, err := inst.describe(instCtx)
	if err != nil {
		p.pool.put(inst, true)
		p.pool.close()
		return nil, refuse(ErrInvalidModule, "reading the ABI version: %v", err)
	}
	if hasSection {
		version = declared
	}
	p.pool.put(inst, false)
	if !slices.Contains(supportedVersions, version) {
		p.pool.close()
		return nil, refuse(ErrUnsupportedABI, "module speaks ABI version %d; this host supports %v", version, supportedVersions)
	}
	if handlers&(abi.HasReconcile|abi.HasAdmit) == 0 {
		p.pool.close()
		return nil, refuse(ErrMissingExport, "module registers neither a reconcile nor an admit handler")
	}
	p.handlers = handlers
	if err := h.track(p); err != nil {
		p.pool.close()
		return nil, err
	}
	if first {
		instrumented()
		p.startTierUp(code, wasm, estimate, runtimeConfig())
	} else {
		h.markCompiled(p.digest)
	}
	p.log.Debug("plugin loaded", "digest", p.digest, "abi", abiKind.String(), "handlers", handlers, "tier", p.Tier())
	return p, nil
}

// compileModule compiles untrusted bytes. wazero's validator can panic on
// malformed input (a call to a function whose declared type index is out of
// range: testdata/instrument/call-type-out-of-range.wasm); the panic
// becomes an error.
func compileModule(ctx context.Context, rt wazero.Runtime, wasm []byte) (m wazero.CompiledModule, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("the module is malformed (the compiler failed: %v)", r)
		}
	}()
	return rt.CompileModule(ctx, wasm)
}

// importsModule reports whether the module imports anything from module
// mod; a malformed module reports false (compiling it gives the error).
func importsModule(wasm []byte, mod string) bool {
	if len(wasm) < 8 {
		return false
	}
	r := reader{b: wasm, i: 8}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if id != 2 {
			continue
		}
		ir := reader{b: body}
		n := ir.u32()
		for i := uint32(0); i < n && ir.err == nil; i++ {
			m := ir.bytes(int(ir.u32()))
			ir.bytes(int(ir.u32()))
			if string(m) == mod {
				return true
			}
			switch ir.byte() {
			case 0x00:
				ir.u32()
			case 0x01:
				ir.byte()
				ir.limits()
			case 0x02:
				ir.limits()
			case 0x03:
				ir.byte()
				ir.byte()
			default:
				return false
			}
		}
		return false
	}
	return false
}

// checkImports accepts only what the host offers.
func checkImports(m wazero.CompiledModule, kind ABI) error {
	var unknown []string
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		ok := false
		switch {
		case mod == wasi_snapshot_preview1.ModuleName:
			ok = true // wazero implements the whole of wasi_snapshot_preview1
		case kind == NativeABI && mod == abi.HostModule:
			ok = slices.Contains(hostFuncNames, name) && sigIs(f, i32x4, i32x1) ||
				name == abi.HostResult && sigIs(f, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, i32x1)
		case kind == ExtismABI && mod == extismEnv:
			ok = slices.Contains(extismEnvFuncs, name)
		case kind == ExtismABI && mod == abi.ExtismUserModule:
			ok = slices.Contains(hostFuncNames, name) && sigIs(f, i64x1, i64x1)
		}
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%s.%s%s", mod, name, sig(f)))
		}
	}
	if len(m.ImportedMemories()) > 0 {
		unknown = append(unknown, "a memory")
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	offer := "wasi_snapshot_preview1 and setpoint.{log,get,list,emit_event,create,update,patch,delete,http} (reqPtr, reqLen, outPtr, outCap i32) -> i32, setpoint.result (i32, i32) -> i32"
	if kind == ExtismABI {
		offer = "wasi_snapshot_preview1, extism:host/env and extism:host/user.{log,get,list,emit_event,create,update,patch,delete,http} (i64) -> i64"
	}
	return fmt.Errorf("the module imports %s, which the host does not offer (it offers %s)", strings.Join(unknown, ", "), offer)
}

// checkExports checks the exports the ABI requires and their signatures.
func checkExports(m wazero.CompiledModule, kind ABI) error {
	ex := m.ExportedFunctions()
	var problems []string
	want := func(name string, params, results []api.ValueType, required bool) bool {
		f, ok := ex[name]
		if !ok {
			if required {
				problems = append(problems, "no export "+name)
			}
			return false
		}
		if !sigIs(f, params, results) {
			problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", name, sig(f), sigString(params, results)))
			return false
		}
		return true
	}
	var handlerParams, handlerResults []api.ValueType
	switch kind {
	case NativeABI:
		want(abi.ExportVersion, nil, i32x1, true)
		want(abi.ExportAlloc, i32x1, i32x1, true)
		want(abi.ExportHandlers, nil, i32x1, false)
		handlerParams, handlerResults = []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}
	case ExtismABI:
		handlerParams, handlerResults = nil, i32x1
	}
	r := want(abi.ExportReconcile, handlerParams, handlerResults, false)
	a := want(abi.ExportAdmit, handlerParams, handlerResults, false)
	want(abi.ExportFinalize, handlerParams, handlerResults, false)
	if !r && !a && len(problems) == 0 {
		problems = append(problems, "exports neither reconcile nor admit")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (%s ABI)", strings.Join(problems, "; "), kind)
	}
	return nil
}

// versionSection reads the optional custom section "setpoint_abi_version"
// (the version in decimal ASCII), how modules that cannot export a function
// for it declare their version.
func versionSection(m wazero.CompiledModule) (version int, ok bool, err error) {
	for _, s := range m.CustomSections() {
		if s.Name() != abi.ExportVersion {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(s.Data())))
		if err != nil {
			return 0, false, fmt.Errorf("custom section %s holds %q, not a version number", abi.ExportVersion, s.Data())
		}
		return v, true, nil
	}
	return 0, false, nil
}

var (
	i32x1 = []api.ValueType{api.ValueTypeI32}
	i32x4 = []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}
	i64x1 = []api.ValueType{api.ValueTypeI64}
)

func sigIs(f api.FunctionDefinition, params, results []api.ValueType) bool {
	return slices.Equal(f.ParamTypes(), params) && slices.Equal(f.ResultTypes(), results)
}

func sig(f api.FunctionDefinition) string { return sigString(f.ParamTypes(), f.ResultTypes()) }

func sigString(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	out := "(" + names(params) + ")"
	if len(results) > 0 {
		out += " -> " + names(results)
	}
	return out
}
