package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Budget bounds what all plugins together may take from the server, however
// their Plugins set their own limits. Zero values get defaults in New
// (docs/RATIONALE.md says why each).
type Budget struct {
	// GuestMemory bounds the linear memory of every instance of every
	// plugin, in bytes: each instance reserves its memory cap while it
	// exists, and an instance that would pass the budget is not started.
	// Default: half the machine's memory (4 GiB where it cannot be read).
	GuestMemory int64
	// MaxCallTimeout bounds a plugin's call timeout. Default 30s, the
	// longest timeout Kubernetes allows an admission webhook.
	MaxCallTimeout time.Duration
	// MaxPoolSize bounds a plugin's pool of instances. Default 32.
	MaxPoolSize int
}

// Budget defaults.
const (
	DefaultMaxCallTimeout = 30 * time.Second
	DefaultMaxPoolSize    = 32
	fallbackGuestMemory   = 4 << 30
)

func (b Budget) withDefaults() Budget {
	if b.GuestMemory <= 0 {
		b.GuestMemory = defaultGuestMemory()
	}
	if b.MaxCallTimeout <= 0 {
		b.MaxCallTimeout = DefaultMaxCallTimeout
	}
	if b.MaxPoolSize <= 0 {
		b.MaxPoolSize = DefaultMaxPoolSize
	}
	return b
}

// defaultGuestMemory is half of MemTotal from /proc/meminfo.
func defaultGuestMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallbackGuestMemory
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemTotal:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil || kb <= 0 {
			break
		}
		return kb << 10 / 2
	}
	return fallbackGuestMemory
}

// checkBudget refuses limits that the server's budget can never serve.
func (b Budget) check(l Limits) error {
	instance := int64(l.MemoryPages) << 16
	switch {
	case l.CallTimeout > b.MaxCallTimeout:
		return fmt.Errorf("callTimeout %v exceeds the server's maximum call timeout of %v (--plugin-max-call-timeout)", l.CallTimeout, b.MaxCallTimeout)
	case l.PoolSize > b.MaxPoolSize:
		return fmt.Errorf("poolSize %d exceeds the server's maximum pool size of %d (--plugin-max-pool-size)", l.PoolSize, b.MaxPoolSize)
	case instance*int64(l.PoolSize) > b.GuestMemory:
		return fmt.Errorf("%d instances of %d pages (%d MiB) each reserve %d MiB, more than the server's guest memory budget of %d MiB (--plugin-guest-memory)",
			l.PoolSize, l.MemoryPages, instance>>20, instance*int64(l.PoolSize)>>20, b.GuestMemory>>20)
	}
	return nil
}

// guestMemory accounts the memory caps of the live instances of a Host
// against Budget.GuestMemory, and hands memory back to the operating system
// after large releases.
type guestMemory struct {
	budget   int64
	reserved atomic.Int64

	mu        sync.Mutex // guards freed, lastFree and pending
	freed     int64      // released since the last FreeOSMemory
	lastFree  time.Time
	pending   bool  // a FreeOSMemory is scheduled
	freeAfter int64 // bytes of caps released that trigger a FreeOSMemory
}

// reserve takes n bytes of the budget, or reports false.
func (g *guestMemory) reserve(n int64) bool {
	for {
		cur := g.reserved.Load()
		if cur+n > g.budget {
			return false
		}
		if g.reserved.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// How release schedules FreeOSMemory: a little after the release that
// reaches freeAfter, so that the releases which come together (a pool
// closing its instances one after another) are all in, and at most every
// freeInterval.
const (
	freeCoalesce = 100 * time.Millisecond
	freeInterval = 10 * time.Second
)

// release gives n bytes back. Once instances with caps of freeAfter bytes
// or more were closed, it returns freed memory to the operating system, at
// most every freeInterval; a release inside the interval is freed at its
// end, not left to the next release: Go keeps a closed instance's linear
// memory in its heap for minutes otherwise, and the server's resident size
// would stay at its peak after a Plugin is deleted or a pool trimmed.
func (g *guestMemory) release(n int64) {
	g.reserved.Add(-n)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.freed += n
	if g.freed < g.freeAfter || g.pending {
		return
	}
	g.pending = true
	time.AfterFunc(max(freeCoalesce, freeInterval-time.Since(g.lastFree)), func() {
		g.mu.Lock()
		g.freed, g.lastFree, g.pending = 0, time.Now(), false
		g.mu.Unlock()
		debug.FreeOSMemory()
	})
}

// GuestMemoryReserved is the memory the live instances of every plugin
// reserve (the sum of their caps), in bytes.
func (h *Host) GuestMemoryReserved() int64 { return h.mem.reserved.Load() }

// limits fills in l's defaults; the default pool size (one instance per
// core) is held to the budget's maximum pool size, so that a Plugin that
// sets none is never refused for it on a machine with many cores.
func (h *Host) limits(l Limits) Limits {
	if l.PoolSize <= 0 {
		l.PoolSize = min(runtime.GOMAXPROCS(0), h.opts.Budget.MaxPoolSize)
	}
	return l.withDefaults()
}
