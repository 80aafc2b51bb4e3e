package peer

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// server is one side of the comparison: how to reach it with client-go
// and which processes and files are its.
type server struct {
	name    string
	cfg     *rest.Config
	ready   time.Duration // from the first process's start to /readyz 200
	pids    func() []int  // every process that serves, for CPU and memory
	dataDir string        // what it keeps on disk
	stop    func()
}

// startSetpoint starts the built Setpoint server (SETPOINT_BIN, or the
// harness's own build) with room for maxWatches watches from loopback.
func startSetpoint(b *testing.B, maxWatches int) *server {
	b.Helper()
	m := strconv.Itoa(maxWatches + 256)
	start := time.Now()
	s := testserver.Start(b, testserver.Options{LogLevel: "warn", Args: []string{
		"--max-watches", m, "--max-connections", m, "--max-connections-per-address", m,
	}})
	ready := time.Since(start)
	pid := s.Pid()
	return &server{
		name:    "Setpoint",
		cfg:     s.RESTConfig(),
		ready:   ready,
		pids:    func() []int { return []int{pid} },
		dataDir: s.DataDir,
		stop: func() {
			if err := s.Stop(); err != nil {
				b.Errorf("stop Setpoint: %v", err)
			}
		},
	}
}

// cpu is the CPU time, in seconds, that the server's processes used so far.
func (s *server) cpu(b *testing.B) float64 {
	var sum float64
	for _, pid := range s.pids() {
		c, err := benchtest.ProcessCPU(pid)
		if err != nil {
			b.Fatalf("%s: CPU of pid %d: %v", s.name, pid, err)
		}
		sum += c
	}
	return sum
}

// rss is the resident memory of the server's processes, in bytes.
func (s *server) rss(b *testing.B) float64 {
	var sum float64
	for _, pid := range s.pids() {
		r, err := residentBytes(pid)
		if err != nil {
			b.Fatalf("%s: RSS of pid %d: %v", s.name, pid, err)
		}
		sum += r
	}
	return sum
}

// residentBytes reads VmRSS from /proc/PID/status.
func residentBytes(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var kb float64
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %f kB", &kb); err == nil {
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// diskBytes is the space the files under dir take on disk (as du counts
// it: allocated blocks, so preallocated logs count in full).
func diskBytes(dir string) (float64, error) {
	var sum float64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			sum += float64(st.Blocks) * 512
		} else {
			sum += float64(info.Size())
		}
		return nil
	})
	return sum, err
}
