package host

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// Compile limits: defaults of Options (docs/RATIONALE.md says why).
const (
	// DefaultMaxCompiles is how many modules compile at once.
	DefaultMaxCompiles = 2
	// DefaultCompileMemory is the compile memory budget, shared by the
	// compiles in progress.
	DefaultCompileMemory = 1 << 30
	// compileBytesPerCodeByte and compileBytesPerNesting estimate what
	// wazero allocates to compile a module, measured on this host: about
	// 22 bytes of heap per byte of code for Go guests, and half a byte per
	// unit of nesting work for deeply nested code. The estimate rounds both
	// up.
	compileBytesPerCodeByte = 32
	compileBytesPerNesting  = 1
)

// compileGate bounds the compiles in progress: their number, and the sum
// of their estimated memory. A compile waits for room under its caller's
// context; one whose estimate exceeds the whole budget is refused.
type compileGate struct {
	slots  chan struct{}
	memory *semaphore.Weighted
	budget int64
}

func newCompileGate(maxCompiles int, budget int64) *compileGate {
	if maxCompiles <= 0 {
		maxCompiles = DefaultMaxCompiles
	}
	if budget <= 0 {
		budget = DefaultCompileMemory
	}
	return &compileGate{slots: make(chan struct{}, maxCompiles), memory: semaphore.NewWeighted(budget), budget: budget}
}

// compileEstimate is the memory a module of this shape is expected to take
// to compile.
func compileEstimate(sh moduleShape) int64 {
	return int64(sh.CodeBytes)*compileBytesPerCodeByte + sh.NestingWork*compileBytesPerNesting + 1<<20
}

// enter waits for a compile slot and for the estimated memory; release
// gives both back.
func (g *compileGate) enter(ctx context.Context, estimate int64) (release func(), err error) {
	if estimate > g.budget {
		return nil, fmt.Errorf("%w: compiling it needs an estimated %d MiB; the server's compile memory budget is %d MiB (--plugin-compile-memory)",
			errVet, estimate>>20, g.budget>>20)
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a compile slot: %w", context.Cause(ctx))
	}
	if err := g.memory.Acquire(ctx, estimate); err != nil {
		<-g.slots
		return nil, fmt.Errorf("waiting for compile memory: %w", err)
	}
	return func() {
		g.memory.Release(estimate)
		<-g.slots
	}, nil
}
