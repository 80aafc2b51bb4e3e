package test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/storetest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// fillDisk writes path until the filesystem under it has no byte left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{1 << 20, 4096} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
}

// TestServerExitsOnStalledDisk freezes the filesystem under a running
// server (fsfreeze: every write waits in the kernel, as on a journal
// stalled behind a full disk) while clients write, and sends SIGTERM: the
// server must give up on the store's close within --store-close-timeout,
// say why, and exit with an error as soon as the kernel lets its last
// write return. Started again, it has every write it acknowledged.
func TestServerExitsOnStalledDisk(t *testing.T) {
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("needs fsfreeze (util-linux) to stall a filesystem")
	}
	mnt := storetest.MountSmallDisk(t, 64<<20)
	dataDir := filepath.Join(mnt, "data")
	args := []string{"--store-free-space-reserve", "16Mi", "--shutdown-timeout", "1s", "--store-close-timeout", "2s"}
	s := testserver.Start(t, testserver.Options{DataDir: dataDir, Args: args})
	createNamespaces(t, s, "before", 20)

	w := startWriters(s, "w")
	testsupport.Eventually(t, 10*time.Second, "writes acknowledged before the freeze", func() bool {
		return len(w.acked()) >= 20
	})

	thaw := storetest.FreezeDisk(t, mnt)

	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 1 s of drain, at least 1 s for the loops, 2 s for the store; the rest
	// is slack for a loaded machine.
	testsupport.Eventually(t, 10*time.Second, "the server to give up closing the store", func() bool {
		return strings.Contains(s.Logs(), "store did not close in time")
	})
	t.Logf("gave up on the store %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(s.Logs(), "stalled or frozen filesystem") {
		t.Errorf("the server does not say why the store did not close:\n%s", s.Logs())
	}
	if n := strings.Count(s.Logs(), "stalled or frozen filesystem"); n != 1 {
		t.Errorf("the server says why the store did not close %d times, want once:\n%s", n, s.Logs())
	}
	thaw()
	err := s.Wait(5 * time.Second)
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("exit after the thaw: %v; want an exit with an error code", err)
	}
	acked := w.stop()
	s.Kill() // exited with an error, as it should: not a failure to stop

	r := testserver.Start(t, testserver.Options{DataDir: dataDir, Args: args})
	for i := range 20 {
		acked = append(acked, fmt.Sprintf("before-%05d", i))
	}
	checkPresent(t, r, acked)
}

// writers create namespaces from 4 clients until stopped or the server
// stops answering, and keep the names they got a 201 for.
type writers struct {
	mu    sync.Mutex
	names []string
	wg    sync.WaitGroup
	done  chan struct{}
}

func startWriters(s *testserver.Server, prefix string) *writers {
	w := &writers{done: make(chan struct{})}
	for g := range 4 {
		w.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-w.done:
					return
				default:
				}
				name := fmt.Sprintf("%s%d-%05d", prefix, g, i)
				code, _, err := s.Do(http.MethodPost, "/api/v1/namespaces", s.Token,
					strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`))
				if err != nil {
					return
				}
				if code == http.StatusCreated {
					w.mu.Lock()
					w.names = append(w.names, name)
					w.mu.Unlock()
				}
			}
		})
	}
	return w
}

func (w *writers) acked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.names)
}

// stop stops the writers and returns the names acknowledged.
func (w *writers) stop() []string {
	close(w.done)
	w.wg.Wait()
	return w.acked()
}

// checkPresent fails the test unless s serves every namespace in names.
func checkPresent(t *testing.T, s *testserver.Server, names []string) {
	t.Helper()
	out, _, err := s.Kubectl("get", "namespaces", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Fields(out) {
		have[strings.TrimPrefix(l, "namespace/")] = true
	}
	missing := 0
	for _, n := range names {
		if !have[n] {
			missing++
			t.Errorf("acknowledged namespace %s is missing after the restart", n)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged namespaces missing after the restart", missing, len(names))
	}
	t.Logf("%d writes acknowledged, all present after the restart", len(names))
}

// TestServerDiskFullAtStart starts a server on a full disk whose store
// lacks one of the default ClusterRoles: the server must serve (reads,
// /readyz) with the defaults' writes refused, retry them, and write them
// once space is freed, with no restart. Then the disk fills under writers
// and the server gets SIGTERM: it must exit at once and cleanly, and
// serve every acknowledged write once space is freed.
func TestServerDiskFullAtStart(t *testing.T) {
	mnt := storetest.MountSmallDisk(t, 64<<20)
	s := testserver.Start(t, testserver.Options{
		DataDir: filepath.Join(mnt, "data"),
		Args:    []string{"--store-free-space-reserve", "16Mi", "--shutdown-timeout", "1s"},
	})
	// The defaults are written once the server serves.
	testsupport.Eventually(t, 10*time.Second, "the default ClusterRole edit", func() bool {
		_, _, err := s.Kubectl("get", "clusterrole", "edit", "-o", "name")
		return err == nil
	})
	if _, stderr, err := s.Kubectl("delete", "clusterrole", "edit"); err != nil {
		t.Fatalf("delete clusterrole edit: %v %s", err, stderr)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	fillDisk(t, filler)
	s.Restart()
	if !strings.Contains(s.Logs(), "opening read-only") {
		t.Fatalf("the server did not open the store read-only on a full disk:\n%s", s.Logs())
	}
	testsupport.Eventually(t, 10*time.Second, "the server to say it retries the default roles", func() bool {
		return strings.Contains(s.Logs(), "default RBAC roles not written yet")
	})
	if code, _, err := s.Do(http.MethodGet, "/readyz", "", nil); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz with the defaults refused: %d %v; want 200", code, err)
	}
	if out, _, err := s.Kubectl("get", "clusterroles", "-o", "name"); err != nil || !strings.Contains(out, "clusterrole.rbac.authorization.k8s.io/view") {
		t.Fatalf("kubectl get clusterroles with the defaults refused: %v\n%s", err, out)
	}
	if _, stderr, err := s.Kubectl("get", "clusterrole", "edit"); err == nil || !strings.Contains(stderr, "NotFound") && !strings.Contains(stderr, "not found") {
		t.Fatalf("clusterrole edit on a full disk: err %v %s; want not found", err, stderr)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The store reopens writable at its next space check (5 s), the
	// defaults' retry (1 s) then writes them.
	testsupport.Eventually(t, 20*time.Second, "the default ClusterRole edit written once space was freed", func() bool {
		_, _, err := s.Kubectl("get", "clusterrole", "edit", "-o", "name")
		return err == nil
	})
	if !strings.Contains(s.Logs(), "default RBAC roles written") {
		t.Errorf("the server does not say the default roles were written:\n%s", s.Logs())
	}

	// The disk fills again under writers; SIGTERM: a prompt, clean exit
	// (the store leaves its memtable to the log rather than flush it
	// onto a full disk), and every acknowledged write once space is back.
	w := startWriters(s, "full")
	testsupport.Eventually(t, 10*time.Second, "writes acknowledged before the disk fills", func() bool {
		return len(w.acked()) >= 10
	})
	fillDisk(t, filler)
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Wait(10 * time.Second); err != nil {
		t.Fatalf("SIGTERM on a full disk: %v after %v; want exit code 0 within 10s", err, time.Since(start))
	}
	t.Logf("exited %v after SIGTERM on a full disk", time.Since(start).Round(time.Millisecond))
	acked := w.stop()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	checkPresent(t, s, acked)
}
