package benchtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Phase is the outcome of one run of n operations.
type Phase struct {
	Ops     int
	Elapsed time.Duration
	Lat     []time.Duration // sorted
	Err     error           // the first failure, if any
}

// Rate is the operations per second.
func (p Phase) Rate() float64 { return float64(p.Ops) / p.Elapsed.Seconds() }

// Quantile is the q quantile of the latencies.
func (p Phase) Quantile(q float64) time.Duration { return Quantile(p.Lat, q) }

// Quantile is the q quantile of sorted latencies, 0 when there are none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// Run calls op(ctx, i) for every i in [0, n) from c goroutines and times
// each call. It stops at the first error or when timeout passes, so a run
// is bounded however slow the system under test is.
func Run(c, n int, timeout time.Duration, op func(ctx context.Context, i int) error) Phase {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	lats := make([][]time.Duration, c)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/c+1)
			defer func() { lats[w] = mine }()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("operation %d: %w", i, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	p := Phase{Elapsed: time.Since(start), Err: firstErr}
	for _, l := range lats {
		p.Lat = append(p.Lat, l...)
	}
	p.Ops = len(p.Lat)
	slices.Sort(p.Lat)
	if p.Err == nil && p.Ops < n {
		p.Err = fmt.Errorf("%d of %d operations done within %v", p.Ops, n, timeout)
	}
	return p
}

// ProcessCPU reads a process's user and system CPU time from /proc, in
// seconds.
func ProcessCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the rest follows its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// FindPID returns the pid of the process whose command line contains
// every one of args (for processes a harness starts without exposing).
func FindPID(args ...string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cl := strings.Split(string(b), "\x00")
		ok := true
		for _, a := range args {
			if !slices.Contains(cl, a) {
				ok = false
				break
			}
		}
		if ok {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process with arguments %q", args)
}
