package host_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// TestBudgetRefusesLimits: limits that the server's budget can never serve
// are refused at load, naming the budget and its flag.
func TestBudgetRefusesLimits(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{Budget: host.Budget{GuestMemory: 1 << 30}})
	wasm := hosttest.Module(t, "widget")
	for _, tt := range []struct {
		name   string
		limits host.Limits
		detail string
	}{
		{"call timeout", host.Limits{CallTimeout: 1000 * time.Hour}, "maximum call timeout of 30s (--plugin-max-call-timeout)"},
		{"pool size", host.Limits{PoolSize: 256}, "maximum pool size of 32 (--plugin-max-pool-size)"},
		{"guest memory", host.Limits{PoolSize: 4, MemoryPages: 8192}, "reserve 2048 MiB, more than the server's guest memory budget of 1024 MiB (--plugin-guest-memory)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), "greedy", wasm, host.Config{Limits: tt.limits})
			if !errors.Is(err, host.ErrOverBudget) || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("err = %v, want ErrOverBudget naming %q", err, tt.detail)
			}
		})
	}
}

// TestGuestMemoryBudget: live instances of all plugins reserve their caps
// from one budget; an instance past it is not started, and closing
// instances (a trimmed pool, a closed plugin) gives their memory back.
func TestGuestMemoryBudget(t *testing.T) {
	const capBytes = 64 << 20 // 1024 pages
	h := hosttest.NewHost(t, host.Options{Budget: host.Budget{GuestMemory: 3 * capBytes}})
	ctx := context.Background()
	cfg := host.Config{Limits: host.Limits{PoolSize: 2, IdleTimeout: 200 * time.Millisecond}}
	a := hosttest.LoadWith(t, h, "widget", cfg)
	b := hosttest.LoadWith(t, h, "widget", cfg)
	if got := h.GuestMemoryReserved(); got != 2*capBytes {
		t.Fatalf("reserved %d MiB with two warm instances, want 128", got>>20)
	}
	if err := a.Prewarm(ctx, 2); err != nil {
		t.Fatal(err)
	}
	err := b.Prewarm(ctx, 2)
	if !errors.Is(err, host.ErrOverBudget) || !strings.Contains(err.Error(), "guest memory budget of 192 MiB") {
		t.Fatalf("a fourth instance: err = %v, want ErrOverBudget", err)
	}
	// a's pool shrinks back to one idle instance after its idle timeout.
	deadline := time.Now().Add(10 * time.Second)
	for h.GuestMemoryReserved() != 2*capBytes {
		if time.Now().After(deadline) {
			t.Fatalf("reserved %d MiB after a's pool was trimmed, want 128", h.GuestMemoryReserved()>>20)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Prewarm(ctx, 2); err != nil {
		t.Fatalf("after the trim: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a.Close()
	b.Close()
	if got := h.GuestMemoryReserved(); got != 0 {
		t.Fatalf("reserved %d bytes after both plugins closed", got)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("heap in use %d MiB with the instances, %d MiB after closing them", before.HeapInuse>>20, after.HeapInuse>>20)
}

// TestDefaultPoolWithinBudget: a plugin that sets no pool size gets one
// instance per core, but never more than the server's maximum pool size.
func TestDefaultPoolWithinBudget(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{Budget: host.Budget{MaxPoolSize: 1}})
	p := hosttest.LoadWith(t, h, "widget", host.Config{})
	if err := p.Prewarm(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().IdleInstances; n != 1 {
		t.Fatalf("%d idle instances after a prewarm of 8 under a maximum pool of 1", n)
	}
}

// heapRetained is the memory the Go heap holds from the operating system
// (HeapSys - HeapReleased): the resident part of the heap, where wazero keeps
// guest memory. Unlike the process's RSS it is not inflated by the race
// detector's shadow memory.
func heapRetained() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapSys - ms.HeapReleased)
}

// TestClosingReturnsMemory: the linear memory of a closed plugin's
// instances goes back to the operating system, not only out of the
// host's accounting.
func TestClosingReturnsMemory(t *testing.T) {
	const instances, mb = 4, 64
	h := hosttest.NewHost(t, host.Options{})
	p, err := h.Load(context.Background(), "grower", hosttest.Module(t, "faulty"),
		host.Config{Limits: host.Limits{PoolSize: instances, MemoryPages: 2048, CallTimeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	base := heapRetained()
	var wg sync.WaitGroup
	for range instances {
		wg.Go(func() {
			if _, err := reconcileMode(context.Background(), p, map[string]string{"mode": "grow", "mb": strconv.Itoa(mb), "sleep": "300ms"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	peak := heapRetained()
	if st := p.Stats(); st.IdleInstances != instances || st.IdleMemoryBytes < instances*mb<<20 {
		t.Fatalf("stats %+v, want %d idle instances of over %d MiB", st, instances, mb)
	}
	p.Close()
	if got := h.GuestMemoryReserved(); got != 0 {
		t.Fatalf("reserved %d bytes after the plugin closed", got)
	}
	grown := peak - base
	var now int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		now = heapRetained()
		if now < peak-grown/2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("heap held from the OS: %d MiB before, %d MiB with %d instances of %d MiB, %d MiB after closing them",
		base>>20, peak>>20, instances, mb, now>>20)
	if grown < instances*mb<<20/2 {
		t.Fatalf("the heap grew by only %d MiB with the instances", grown>>20)
	}
	if now >= peak-grown/2 {
		t.Fatalf("the heap still holds %d MiB after closing the plugin (peak %d MiB)", now>>20, peak>>20)
	}
}
