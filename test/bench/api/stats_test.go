package api

import (
	"context"
	"fmt"
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

func (p phase) quantile(q float64) time.Duration { return benchtest.Quantile(p.lat, q) }

// run calls op(ctx, i) for every i in [0, n) from c goroutines and times
// each call (benchtest.Run).
func run(c, n int, timeout time.Duration, op func(ctx context.Context, i int) error) phase {
	p := benchtest.Run(c, n, timeout, op)
	return phase{ops: p.Ops, elapsed: p.Elapsed, lat: p.Lat, err: p.Err}
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// processCPU reads a process's CPU time in seconds (benchtest.ProcessCPU).
func processCPU(pid int) (float64, error) { return benchtest.ProcessCPU(pid) }

// findPID returns the pid of the process whose command line contains
// every one of args (the server is started by the harness, which does not
// expose it).
func findPID(args ...string) (int, error) { return benchtest.FindPID(args...) }

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
