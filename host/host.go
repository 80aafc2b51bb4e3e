package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
)

// Options configure a Host. Zero values get defaults in New.
type Options struct {
	// CacheDir holds the on-disk compilation cache, so a restart does not
	// recompile modules. Empty keeps compiled code in memory only.
	CacheDir string
	// Logger receives plugin logs (host function log) and host diagnostics.
	// Default: slog.Default().
	Logger *slog.Logger
	// Objects serves the get and list host functions, and the write host
	// functions (create, update, patch, delete) when it also implements
	// ObjectWriter. Nil denies them all.
	Objects ObjectReader
	// Events records events emitted by plugins. Nil logs them instead.
	Events EventRecorder
	// Vet are the structural limits a module must fit before it is
	// compiled.
	Vet VetLimits
	// MaxCompiles bounds the modules compiling at once. Default
	// DefaultMaxCompiles.
	MaxCompiles int
	// CompileMemory bounds the estimated memory of the compiles in
	// progress, in bytes. Default DefaultCompileMemory.
	CompileMemory int64
	// CompileTimeout bounds one load's compile, within its caller's
	// context. Default DefaultCompileTimeout.
	CompileTimeout time.Duration
	// Budget bounds all plugins together.
	Budget Budget
	// InterpreterFirst loads a module the host has not compiled before on
	// wazero's interpreter, which serves calls at once, and compiles it in
	// the background; new calls move to the compiled code when it is ready
	// (see tier.go).
	InterpreterFirst bool
	// InterpreterMinCodeBytes is the least code a module needs to be
	// loaded on the interpreter first. Default
	// DefaultInterpreterMinCodeBytes.
	InterpreterMinCodeBytes int
	// Egress is told about every HTTP call of every plugin. Nil: nobody.
	Egress EgressObserver
}

// DefaultCompileTimeout bounds one module's compile.
const DefaultCompileTimeout = 2 * time.Minute

// Config is the configuration of one plugin version.
type Config struct {
	Permissions Permissions
	Limits      Limits
	// DisablePreemption runs calls without close-on-context-done: faster,
	// but a spinning guest cannot be stopped. For benchmarks only.
	DisablePreemption bool
	// Egress is what the plugin may reach over HTTP; nil grants nothing.
	Egress *Egress
}

// Limits bound one plugin version. Zero values get defaults.
type Limits struct {
	// CallTimeout is the deadline of one call. Default 1s.
	CallTimeout time.Duration
	// MemoryPages caps each instance's linear memory, in 64 KiB pages.
	// Default 1024 (64 MiB).
	MemoryPages uint32
	// PoolSize caps the number of instances. Default GOMAXPROCS.
	PoolSize int
	// IdleTimeout closes instances unused for that long. Default 1 minute.
	IdleTimeout time.Duration
	// MaxOutputBytes bounds a response document. Default 4 MiB.
	MaxOutputBytes int
	// MaxHostCalls bounds the host calls of one call. Default 1000.
	MaxHostCalls int
}

func (l Limits) withDefaults() Limits {
	if l.CallTimeout <= 0 {
		l.CallTimeout = time.Second
	}
	if l.MemoryPages == 0 {
		l.MemoryPages = 1024
	}
	if l.MemoryPages > 65536 {
		l.MemoryPages = 65536
	}
	if l.PoolSize <= 0 {
		l.PoolSize = runtime.GOMAXPROCS(0)
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = time.Minute
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = 4 << 20
	}
	if l.MaxHostCalls <= 0 {
		l.MaxHostCalls = 1000
	}
	return l
}

// Host loads and runs plugins. It is safe for concurrent use.
type Host struct {
	opts  Options
	cache wazero.CompilationCache
	gate  *compileGate
	mem   *guestMemory

	mu      sync.Mutex // guards closed, plugins, instrumented and compiled
	closed  bool
	plugins map[*Plugin]struct{} // loaded and not yet closed
	// instrumented keeps the rewritten bytes of the last few modules by
	// digest, so reloading a version (a rollback, a restart of a plugin)
	// skips the rewrite; order lists the digests oldest first. See
	// instrumentcache.go.
	instrumented map[string][]byte
	order        []string
	// compiled holds the digests of the modules compiled by the optimizing
	// compiler (see tier.go).
	compiled map[string]struct{}
	tiers    tierCounters
	// tierCompileHook, when set, runs before each background compile; a
	// test makes it fail.
	tierCompileHook func(context.Context) error
}

// New returns a Host. It creates CacheDir when it does not exist.
func New(opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Vet = opts.Vet.withDefaults()
	opts.Budget = opts.Budget.withDefaults()
	if opts.CompileTimeout <= 0 {
		opts.CompileTimeout = DefaultCompileTimeout
	}
	if opts.InterpreterMinCodeBytes <= 0 {
		opts.InterpreterMinCodeBytes = DefaultInterpreterMinCodeBytes
	}
	h := &Host{opts: opts, plugins: make(map[*Plugin]struct{}), instrumented: make(map[string][]byte), compiled: make(map[string]struct{}),
		gate: newCompileGate(opts.MaxCompiles, opts.CompileMemory),
		mem:  &guestMemory{budget: opts.Budget.GuestMemory, freeAfter: 64 << 20}}
	if opts.CacheDir != "" {
		if err := os.MkdirAll(opts.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("host: cache dir: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: cache dir: %w", err)
		}
		h.cache = c
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	return h, nil
}

func (h *Host) track(p *Plugin) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.plugins[p] = struct{}{}
	return nil
}

func (h *Host) untrack(p *Plugin) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.plugins, p)
}

// Close closes every plugin still loaded (waiting for their calls) and the
// compilation cache. It is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps := make([]*Plugin, 0, len(h.plugins))
	for p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
	return h.cache.Close(context.Background())
}
