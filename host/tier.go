package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// Tiers.
//
// wazero's optimizing compiler takes most of a cold load: about three
// quarters of a second for a 3 MB Go guest on a quiet core, seconds on a
// loaded one. With Options.InterpreterFirst a module the host has not
// compiled before is loaded on wazero's interpreter, whose translation is
// several times cheaper, and serves calls at once; the compiler runs in the
// background, under the compile gate like any compile, and its runner
// replaces the interpreter's in the version's pool (pool.upgrade): calls in
// flight finish on their interpreter instances, which are then closed, and
// new calls start compiled instances. The interpreter runs the module as
// uploaded and stops a call at its deadline by wazero's
// close-on-context-done (see interpreterConfig); the compiled code is the
// instrumented module, for native-ABI guests, stopped by the loop checks'
// stop global, or the uploaded one under close-on-context-done. The
// rewrite that instruments a module runs beside the interpreter's compile
// rather than before it, off the way to the first call.
//
// A module compiled once is marked (in memory, and on disk next to the
// compilation cache), so a later load of it (a restart, a rollback) goes
// straight to the compiler, whose cache makes it cheap. A background
// compile that fails leaves the version on the interpreter, with the
// reason in TierError (the Plugin's status.tierError); the next load
// tries again. A module that fails to load on the interpreter, or whose
// first instance takes longer than interpreterStartBudget there, loads
// compiled as it would without it.

// Tier names, as Plugin.Tier reports them.
const (
	TierInterpreter = "interpreter"
	TierCompiled    = "compiled"
)

// DefaultInterpreterMinCodeBytes is the least code a module needs for
// InterpreterFirst to load it on the interpreter: smaller modules compile
// in milliseconds.
const DefaultInterpreterMinCodeBytes = 256 << 10

// interpreterStartBudget bounds starting and describing the first
// instance on the interpreter. A Go guest's runtime starts there in tens
// of milliseconds; a module whose start does much more work (filling
// memory, say) may run a hundred times slower interpreted than compiled,
// and loads compiled instead.
const interpreterStartBudget = 2 * time.Second

// tierUpDelay bounds how long a version loaded on the interpreter waits
// before its background compile starts when nothing calls it. The compile
// takes every core for a second or more; a module just uploaded is about
// to be stored, named by its Plugin and reported Ready, and a compile
// started at once would slow each of those steps. The first call starts
// the compile without waiting: a version in use wants its compiled code
// as early as it can have it.
const tierUpDelay = time.Second

// interpreterFailed is a load on the interpreter that failed; Load then
// loads the module compiled.
type interpreterFailed struct{ err error }

func (e *interpreterFailed) Error() string { return e.err.Error() }

// tierState is a version's background compile.
type tierState struct {
	// interpreted is set while calls run on the interpreter.
	interpreted atomic.Bool
	err         atomic.Pointer[string]
	switchedIn  atomic.Int64 // nanoseconds from load to the switch, once switched
	// mu orders Adopt's renaming before or after the instance the
	// background compile starts, whose guest output is logged by name.
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{} // closed when the background compile ended; nil without one
	stopOnce sync.Once
	// called is closed by the version's first call, which starts the
	// background compile without waiting tierUpDelay.
	called     chan struct{}
	calledOnce sync.Once
}

// calling notes a call of a version on the interpreter.
func (t *tierState) calling() {
	if t.called != nil && t.interpreted.Load() {
		t.calledOnce.Do(func() { close(t.called) })
	}
}

// stop cancels the background compile and waits for it to end.
func (t *tierState) stop() {
	if t.done == nil {
		return
	}
	t.stopOnce.Do(t.cancel)
	<-t.done
}

// TierStats count the switches of every version of a host.
type TierStats struct {
	// Interpreted counts the versions loaded on the interpreter; Switched
	// those that moved to compiled code, Failed those whose background
	// compile failed.
	Interpreted, Switched, Failed int64
}

// TierStats reports the host's tier counters.
func (h *Host) TierStats() TierStats {
	return TierStats{Interpreted: h.tiers.interpreted.Load(), Switched: h.tiers.switched.Load(), Failed: h.tiers.failed.Load()}
}

type tierCounters struct{ interpreted, switched, failed atomic.Int64 }

// Tier reports which code serves new calls: TierInterpreter until the
// background compile replaced it, TierCompiled otherwise.
func (p *Plugin) Tier() string {
	if p.tier.interpreted.Load() {
		return TierInterpreter
	}
	return TierCompiled
}

// TierError says why a version stays on the interpreter: its background
// compile failed. It is empty otherwise.
func (p *Plugin) TierError() string {
	if e := p.tier.err.Load(); e != nil {
		return *e
	}
	return ""
}

// WaitCompiled waits until the version runs compiled code, or its
// background compile failed (the error says why), or ctx is done.
func (p *Plugin) WaitCompiled(ctx context.Context) error {
	if p.tier.done != nil {
		select {
		case <-p.tier.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if e := p.TierError(); e != "" {
		return errors.New(e)
	}
	return nil
}

// interpreterFirst reports whether a module of this shape and digest loads
// on the interpreter.
func (h *Host) interpreterFirst(digest string, sh moduleShape) bool {
	return h.opts.InterpreterFirst && sh.CodeBytes >= h.opts.InterpreterMinCodeBytes && !h.compiledBefore(digest)
}

// interpreterConfig is rcfg's settings on the interpreter, without the
// compilation cache: interpreted code is not worth keeping. Calls stop at
// their deadline by wazero's close-on-context-done, which the interpreter
// checks at every loop head with an atomic load, at little cost next to
// interpreting; the loop checks' stop global, set from another goroutine,
// would be a data race there, since interpreted code reads globals as Go
// memory.
func interpreterConfig(cfg Config) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfigInterpreter().
		WithCloseOnContextDone(!cfg.DisablePreemption).
		WithMemoryLimitPages(cfg.Limits.MemoryPages).
		WithCustomSections(true)
}

// startTierUp compiles the version's module in the background and switches
// its pool to the compiled code. code is what the native runner compiles
// (the instrumented module), wasm what the Extism runner does.
func (p *Plugin) startTierUp(code, wasm []byte, estimate int64, rcfg wazero.RuntimeConfig) {
	h := p.host
	ctx, cancel := context.WithCancel(context.Background())
	p.tier.cancel, p.tier.done, p.tier.called = cancel, make(chan struct{}), make(chan struct{})
	p.tier.interpreted.Store(true)
	p.pool.startFirstTier()
	h.tiers.interpreted.Add(1)
	start := time.Now()
	// Adopt may rename the version while it compiles: the goroutine logs
	// by digest and reads nothing Adopt writes.
	log := h.opts.Logger.With("digest", p.digest)
	go func() {
		defer close(p.tier.done)
		defer cancel()
		wait := time.NewTimer(tierUpDelay)
		select {
		case <-p.tier.called:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
		if err := p.tierUp(ctx, code, wasm, estimate, rcfg); err != nil {
			if ctx.Err() != nil {
				return // the version closed
			}
			msg := "compiling the module in the background failed, so it keeps running on the interpreter (slower): " + err.Error()
			p.tier.err.Store(&msg)
			h.tiers.failed.Add(1)
			log.Warn("plugin module stays on the interpreter", "err", err.Error())
			return
		}
		p.tier.switchedIn.Store(int64(time.Since(start)))
		log.Debug("plugin module switched to compiled code", "after", time.Since(start))
	}()
}

// tierUp compiles, switches the pool and starts one compiled instance.
func (p *Plugin) tierUp(ctx context.Context, code, wasm []byte, estimate int64, rcfg wazero.RuntimeConfig) error {
	h := p.host
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.CompileTimeout,
		fmt.Errorf("compiling the module took longer than %v (--plugin-compile-timeout)", h.opts.CompileTimeout))
	defer cancel()
	r, err := p.compileRunner(cctx, code, wasm, estimate, rcfg)
	if err != nil {
		return err
	}
	if !p.pool.upgrade(r) {
		r.close(ctx)
		return ctx.Err()
	}
	p.tier.interpreted.Store(false)
	h.tiers.switched.Add(1)
	h.markCompiled(p.digest)
	// A warm compiled instance, so that the first call after the switch
	// does not start one; calls start their own when this fails.
	p.tier.mu.Lock()
	_ = p.pool.prewarm(ctx, 1)
	p.tier.mu.Unlock()
	return nil
}

// compileRunner compiles the module with the optimizing compiler and
// returns its runner.
func (p *Plugin) compileRunner(ctx context.Context, code, wasm []byte, estimate int64, rcfg wazero.RuntimeConfig) (runner, error) {
	h := p.host
	if h.tierCompileHook != nil {
		if err := h.tierCompileHook(ctx); err != nil {
			return nil, err
		}
	}
	release, err := h.gate.enter(ctx, estimate)
	if err != nil {
		return nil, err
	}
	defer release()
	wctx := experimental.WithCompilationWorkers(ctx, max(2, runtime.GOMAXPROCS(0)))
	if p.abi == ExtismABI {
		r, err := newExtismRunner(wctx, p, rcfg, wasm, h.opts.CacheDir)
		if err == nil && ctx.Err() != nil {
			r.close(ctx)
			return nil, context.Cause(ctx)
		}
		return r, err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rcfg)
	compiled, err := compileModule(wctx, rt, code)
	if err == nil && ctx.Err() != nil {
		compiled.Close(ctx)
		err = context.Cause(ctx)
	}
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	r, err := newNativeRunner(ctx, p, rt, compiled)
	if err != nil {
		compiled.Close(ctx) // newNativeRunner closed rt
		return nil, err
	}
	return r, nil
}

// compiledBefore reports whether the host compiled the module with digest
// (in this process, or before a restart with the same cache dir).
func (h *Host) compiledBefore(digest string) bool {
	h.mu.Lock()
	_, ok := h.compiled[digest]
	h.mu.Unlock()
	if ok {
		return true
	}
	if path := h.compiledMarker(digest); path != "" {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// markCompiled records that the module with digest compiled.
func (h *Host) markCompiled(digest string) {
	h.mu.Lock()
	_, ok := h.compiled[digest]
	h.compiled[digest] = struct{}{}
	h.mu.Unlock()
	if path := h.compiledMarker(digest); path != "" && !ok {
		err := os.MkdirAll(filepath.Dir(path), 0o700)
		if err == nil {
			err = os.WriteFile(path, nil, 0o600)
		}
		if err != nil {
			h.opts.Logger.Warn("cannot mark a module compiled", "digest", digest, "err", err.Error())
		}
	}
}

// forgetCompiled drops the mark of a deleted module.
func (h *Host) forgetCompiled(digest string) {
	h.mu.Lock()
	delete(h.compiled, digest)
	h.mu.Unlock()
	if path := h.compiledMarker(digest); path != "" {
		os.Remove(path)
	}
}

// compiledMarker is the file that marks a compiled module, or "" without a
// cache dir.
func (h *Host) compiledMarker(digest string) string {
	if h.opts.CacheDir == "" {
		return ""
	}
	return filepath.Join(h.opts.CacheDir, "compiled", strings.TrimPrefix(digest, "sha256:"))
}
