package api

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

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// phase is the outcome of one run of n operations.
type phase struct {
	ops     int
	elapsed time.Duration
	lat     []time.Duration // sorted
	err     error           // the first failure, if any
}

func (p phase) rate() float64 { return float64(p.ops) / p.elapsed.Seconds() }

func (p phase) quantile(q float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(p.lat)))) - 1
	return p.lat[max(i, 0)]
}

// run calls op(ctx, i) for every i in [0, n) from c goroutines and times
// each call. It stops at the first error or when timeout passes, so a run
// is bounded however slow the system under test is.
func run(c, n int, timeout time.Duration, op func(ctx context.Context, i int) error) phase {
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
	p := phase{elapsed: time.Since(start), err: firstErr}
	for _, l := range lats {
		p.lat = append(p.lat, l...)
	}
	p.ops = len(p.lat)
	slices.Sort(p.lat)
	if p.err == nil && p.ops < n {
		p.err = fmt.Errorf("%d of %d operations done within %v", p.ops, n, timeout)
	}
	return p
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// processCPU reads a process's user and system CPU time from /proc, in
// seconds.
func processCPU(pid int) (float64, error) {
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

// findPID returns the pid of the process whose command line contains
// every one of args (the server is started by the harness, which does not
// expose it).
func findPID(args ...string) (int, error) {
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

// cpuMeter measures the CPU a server process and this process spend over a
// phase; the figures per operation do not depend on how much CPU the
// machine's other users leave.
type cpuMeter struct {
	pid              int
	server0, client0 float64
	server, client   float64 // seconds, after stop
	serverOK         bool
}

func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid, client0: benchtest.SelfCPU()}
	var err error
	m.server0, err = processCPU(pid)
	m.serverOK = err == nil
	return m
}

func (m *cpuMeter) stop() {
	m.client = benchtest.SelfCPU() - m.client0
	if s, err := processCPU(m.pid); err == nil && m.serverOK {
		m.server = s - m.server0
	} else {
		m.serverOK = false
	}
}

func (m *cpuMeter) perOp(ops int) string {
	if ops == 0 {
		return ""
	}
	srv := "server n/a"
	if m.serverOK {
		srv = fmt.Sprintf("server %.0f µs/op", m.server/float64(ops)*1e6)
	}
	return fmt.Sprintf("CPU: %s, client %.0f µs/op", srv, m.client/float64(ops)*1e6)
}
