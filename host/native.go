package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// runner makes instances of one compiled plugin version.
type runner interface {
	newInstance(ctx context.Context) (instance, error)
	close(ctx context.Context)
}

// instance is one sandbox of a plugin version; it serves one call at a time.
type instance interface {
	// call runs export on input; the output aliases guest or instance memory
	// and is valid until the next call. A failure is a *failure.
	call(ctx context.Context, export string, input []byte) ([]byte, error)
	// describe reports the ABI version and the handler bits.
	describe(ctx context.Context) (version int, handlers int32, err error)
	// memoryBytes is the size of the guest's linear memory.
	memoryBytes() uint64
	// encodeBuffer is a buffer for encoding requests, reused across calls.
	encodeBuffer() *[]byte
	close(ctx context.Context)
}

// failure is why one call into an instance failed.
type failure struct {
	err    error // a sentinel or a context error
	detail string
	// keep means the instance is still sound (the guest reported the
	// failure itself) and may serve again.
	keep bool
}

func (f *failure) Error() string { return f.err.Error() + ": " + f.detail }
func (f *failure) Unwrap() error { return f.err }

// nativeRunner runs modules of the native ABI on a wazero runtime of their
// own, which carries the plugin's memory cap and preemption setting.
type nativeRunner struct {
	p        *Plugin
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	// ownPreemption: the instances arm the loop checks' stop global; false
	// on the interpreter, whose runtime closes on context done (tier.go).
	ownPreemption bool
}

func newNativeRunner(ctx context.Context, p *Plugin, rt wazero.Runtime, compiled wazero.CompiledModule) (*nativeRunner, error) {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	b := rt.NewHostModuleBuilder(abi.HostModule)
	for _, name := range hostFuncNames {
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
				nativeHostCall(ctx, m, name, stack)
			}), i32x4, i32x1).
			WithParameterNames("req_ptr", "req_len", "out_ptr", "out_cap").
			Export(name)
	}
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(nativeResult), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, i32x1).
		WithParameterNames("out_ptr", "out_cap").
		Export(abi.HostResult)
	if _, err := b.Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return &nativeRunner{p: p, rt: rt, compiled: compiled, ownPreemption: p.ownPreemption}, nil
}

// close closes the runtime (the host modules and any instance left) and the
// compiled module, which the shared compilation cache's engine would keep
// otherwise.
func (r *nativeRunner) close(ctx context.Context) {
	r.rt.Close(ctx)
	r.compiled.Close(ctx)
}

func (r *nativeRunner) newInstance(parent context.Context) (instance, error) {
	out := &tailBuffer{}
	clock := &callClock{}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize runs below, under the deadline

		WithStdout(r.p.guestOutput(out)).WithStderr(r.p.guestOutput(out)).
		WithSysWalltime().WithSysNanotime().WithNanosleep(clock.sleep).
		WithRandSource(rand.Reader)
	ctx, cancel := context.WithTimeout(parent, initTimeout(r.p.cfg.Limits))
	defer cancel()
	clock.done = ctx.Done()
	defer func() { clock.done = nil }()
	mod, err := r.rt.InstantiateModule(ctx, r.compiled, cfg)
	if err != nil {
		return nil, startFailed(parent, ctx, err, out, r.p.cfg.Limits)
	}
	in := &nativeInstance{p: r.p, mod: mod, mem: mod.Memory(), out: out, clock: clock,
		alloc: mod.ExportedFunction(abi.ExportAlloc)}
	in.fns[0] = mod.ExportedFunction(abi.ExportReconcile)
	in.fns[1] = mod.ExportedFunction(abi.ExportAdmit)
	in.fns[2] = mod.ExportedFunction(abi.ExportFinalize)
	if r.ownPreemption {
		g, ok := mod.ExportedGlobal(stopGlobal).(api.MutableGlobal)
		if !ok {
			mod.Close(ctx)
			return nil, &failure{err: ErrInvalidModule, detail: "the preemption global is missing"}
		}
		in.stop = g
	}
	if init := mod.ExportedFunction("_initialize"); init != nil {
		release := in.guard(ctx)
		_, err := init.Call(ctx)
		if !release() || err != nil {
			mod.Close(ctx)
			if err == nil {
				err = ctx.Err()
			}
			return nil, startFailed(parent, ctx, err, out, r.p.cfg.Limits)
		}
	}
	return in, nil
}

// guard arms the preemption global for one call: when ctx is done the
// guest traps at its next loop head. The returned release reports false
// when the guard fired; the instance must then be discarded.
func (in *nativeInstance) guard(ctx context.Context) (release func() bool) {
	if in.stop == nil {
		return alwaysTrue
	}
	return context.AfterFunc(ctx, func() { in.stop.Set(1) })
}

func alwaysTrue() bool { return true }

// nativeInstance is one guest module instance of the native ABI.
type nativeInstance struct {
	p     *Plugin
	mod   api.Module
	mem   api.Memory
	out   *tailBuffer // the guest's stdout and stderr, last bytes
	alloc api.Function
	fns   [3]api.Function // reconcile, admit, finalize
	// inPtr and inCap locate the input region the guest allocated.
	inPtr, inCap uint32
	stack        [2]uint64
	// stop is the preemption global of an instrumented module, or nil.
	stop api.MutableGlobal
	// clock is the guest's sleep, bound to the call in progress.
	clock *callClock
	enc   []byte
}

func (in *nativeInstance) encodeBuffer() *[]byte { return &in.enc }

func (in *nativeInstance) memoryBytes() uint64 { return uint64(in.mem.Size()) }

func (in *nativeInstance) close(ctx context.Context) { in.mod.Close(ctx) }

// describe runs the guest's version and handler exports under the
// instantiation deadline; when they spin the guard stops them and the
// instance must be discarded.
func (in *nativeInstance) describe(ctx context.Context) (version int, handlers int32, err error) {
	ctx, cancel := context.WithTimeout(ctx, initTimeout(in.p.cfg.Limits))
	defer cancel()
	in.clock.done = ctx.Done()
	defer func() { in.clock.done = nil }()
	release := in.guard(ctx)
	defer func() {
		if !release() && err == nil {
			err = classify(ctx, ctx.Err(), in.out, in.p.cfg.Limits)
		}
	}()
	res, err := in.mod.ExportedFunction(abi.ExportVersion).Call(ctx)
	if err != nil {
		return 0, 0, classify(ctx, err, in.out, in.p.cfg.Limits)
	}
	version = int(int32(res[0]))
	if f := in.mod.ExportedFunction(abi.ExportHandlers); f != nil {
		res, err := f.Call(ctx)
		if err != nil {
			return 0, 0, classify(ctx, err, in.out, in.p.cfg.Limits)
		}
		return version, int32(res[0]), nil
	}
	return version, handlerBitsOf(in.fns[0] != nil, in.fns[1] != nil, in.fns[2] != nil), nil
}

func handlerBitsOf(reconcile, admit, finalize bool) int32 {
	var b int32
	if reconcile {
		b |= abi.HasReconcile
	}
	if admit {
		b |= abi.HasAdmit
	}
	if finalize {
		b |= abi.HasFinalize
	}
	return b
}

func exportIndex(export string) int {
	switch export {
	case abi.ExportReconcile:
		return 0
	case abi.ExportAdmit:
		return 1
	}
	return 2
}

func (in *nativeInstance) call(ctx context.Context, export string, input []byte) ([]byte, error) {
	fn := in.fns[exportIndex(export)]
	if fn == nil {
		return nil, &failure{err: ErrNoHandler, detail: "the module does not export " + export, keep: true}
	}
	in.out.reset()
	release := in.guard(ctx)
	in.clock.done = ctx.Done()
	out, err := in.run(ctx, fn, input)
	in.clock.done = nil
	if !release() && err == nil {
		// The deadline passed as the call returned: the guard may have
		// set the stop global, so the instance cannot serve again.
		err = classify(ctx, ctx.Err(), in.out, in.p.cfg.Limits)
	}
	return out, err
}

func (in *nativeInstance) run(ctx context.Context, fn api.Function, input []byte) ([]byte, error) {
	n := len(input)
	if n > abi.MaxDocumentLen {
		return nil, &failure{err: ErrBadOutput, detail: fmt.Sprintf("input of %d bytes is too large", n), keep: true}
	}
	if uint32(n) > in.inCap || in.inPtr == 0 {
		in.stack[0] = uint64(n)
		if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
			return nil, classify(ctx, err, in.out, in.p.cfg.Limits)
		}
		if in.stack[0] == 0 {
			return nil, &failure{err: ErrMemoryLimit, detail: fmt.Sprintf("the guest could not allocate %d bytes of input", n)}
		}
		in.inPtr, in.inCap = uint32(in.stack[0]), uint32(max(n, 1))
	}
	if !in.mem.Write(in.inPtr, input) {
		return nil, &failure{err: ErrTrap, detail: fmt.Sprintf("input region at %d is outside guest memory", in.inPtr)}
	}
	in.stack[0], in.stack[1] = uint64(in.inPtr), uint64(n)
	if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, classify(ctx, err, in.out, in.p.cfg.Limits)
	}
	packed := in.stack[0]
	ptr, lenFlags := uint32(packed>>32), uint32(packed)
	size := lenFlags &^ abi.FailureFlag
	if limit := in.p.cfg.Limits.MaxOutputBytes; int(size) > limit {
		return nil, &failure{err: ErrBadOutput, detail: fmt.Sprintf("output of %d bytes exceeds the limit of %d", size, limit)}
	}
	out, ok := in.mem.Read(ptr, size)
	if !ok {
		return nil, &failure{err: ErrBadOutput, detail: fmt.Sprintf("output region [%d, %d) is outside guest memory", ptr, uint64(ptr)+uint64(size))}
	}
	if lenFlags&abi.FailureFlag != 0 {
		return nil, &failure{err: ErrGuestPanic, detail: normalizeTrace(truncate(string(out), 2048)), keep: true}
	}
	return out, nil
}

// ended is the failure of a call whose context ended (its deadline, or its
// caller canceling it), as ctx or the guest's exit (err, may be nil) says;
// nil when it did not end.
func ended(ctx context.Context, err error, l Limits) *failure {
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	switch {
	case isExit && exit.ExitCode() == sys.ExitCodeDeadlineExceeded,
		errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &failure{err: ErrTimeout, detail: fmt.Sprintf("the call ran past its deadline (call timeout %v) and was stopped", l.CallTimeout)}
	case isExit && exit.ExitCode() == sys.ExitCodeContextCanceled, errors.Is(ctx.Err(), context.Canceled):
		return &failure{err: context.Canceled, detail: "the caller canceled the call"}
	}
	return nil
}

// classify maps an error of a guest call to a failure.
func classify(ctx context.Context, err error, out *tailBuffer, l Limits) *failure {
	if f := ended(ctx, err, l); f != nil {
		return f
	}
	if errors.Is(err, errBudget) {
		return &failure{err: ErrHostCallLimit, detail: fmt.Sprintf("more than %d host calls in one call", l.MaxHostCalls)}
	}
	tail := out.String()
	if i := strings.Index(tail, "out of memory"); i >= 0 {
		line := tail[strings.LastIndexByte(tail[:i], '\n')+1:]
		line, _, _ = strings.Cut(line, "\n")
		return &failure{err: ErrMemoryLimit, detail: fmt.Sprintf("the guest ran out of memory under its cap of %d pages (%d MiB): %s",
			l.MemoryPages, l.MemoryPages/16, line)}
	}
	if exit := (*sys.ExitError)(nil); errors.As(err, &exit) {
		return &failure{err: ErrTrap, detail: normalizeTrace(fmt.Sprintf("the guest exited with code %d: %s", exit.ExitCode(), lastLines(tail, 6)))}
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if tail != "" {
		msg += ": " + lastLines(tail, 6)
	}
	return &failure{err: ErrTrap, detail: normalizeTrace(msg)}
}

// startFailed classifies an error of starting an instance: start is the
// context initTimeout bounds, parent the one it came from. A start that
// ran past its own budget says so, rather than speak of a call's deadline.
func startFailed(parent, start context.Context, err error, out *tailBuffer, l Limits) *failure {
	if parent.Err() == nil && errors.Is(start.Err(), context.DeadlineExceeded) {
		return &failure{err: ErrTimeout, detail: fmt.Sprintf(
			"starting an instance (the module's initialization) took longer than its budget of %v (ten times the call timeout, at least %v) and was stopped",
			initTimeout(l), minInitTimeout)}
	}
	return classify(start, err, out, l)
}

// initTimeout is the budget of starting an instance: instantiating the
// module and running its initialization.
func initTimeout(l Limits) time.Duration {
	if t := 10 * l.CallTimeout; t > minInitTimeout {
		return t
	}
	return minInitTimeout
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func isExit(err error) bool {
	var exit *sys.ExitError
	return errors.As(err, &exit)
}
