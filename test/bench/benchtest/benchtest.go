// Package benchtest holds what the end-to-end benchmarks under test/bench
// share to read their knobs and the machine's state: integer knobs from the
// environment, the load average, the benchmark process's own CPU time.
package benchtest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Env reads a positive integer knob from the environment, so a run can be
// scaled without editing; def when it is unset or not a positive integer.
func Env(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// MustEnv reads a positive integer knob from the environment: def when it
// is unset; anything but a positive integer fails tb.
func MustEnv(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// LoadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg, or
// "?" where there is none.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// SelfCPU is the CPU time (user and system) this process used so far, in
// seconds.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
