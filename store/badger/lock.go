package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/setpoint-dev/setpoint/store"
)

// ErrLocked is returned by Open when another process has the directory open.
var ErrLocked = errors.New("store/badger: the data directory is in use by another process")

// lockName is the store's own lock file. Badger holds its LOCK too, but only
// once Open has reached it, after the store has read and verified the
// directory; this one is taken first, so a second server is refused before
// it reads anything, with a message that says what to do.
const lockName = "setpoint.lock"

// dirLock is an exclusive flock on lockName, held while the store is open.
// The kernel drops it when the process dies, so a crash leaves no stale lock.
// pid is what the file holds.
type dirLock struct {
	f   *os.File
	pid []byte
}

func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store/badger: create %s: %w", dir, noSpace(err))
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store/badger: open %s: %w", path, noSpace(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (process %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w%s: %s is locked; stop the other server, or give this one its own --data-dir", ErrLocked, holder, path)
		}
		return nil, fmt.Errorf("store/badger: lock %s: %w", path, err)
	}
	// The holder's pid, for the message above; the lock itself is the flock.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0)
	}
	return &dirLock{f: f, pid: pid}, nil
}

// waitWritable returns once the filesystem under the store takes writes:
// it rewrites the lock file's contents with write(2), which the kernel holds
// while the filesystem is frozen or stalled behind its journal.
//
// Badger writes its log and tables through memory maps. A goroutine that
// touches a mapped page of a filesystem that refuses writes waits in a page
// fault, where the Go runtime cannot stop it; the next garbage collection
// then waits for it with every other goroutine stopped, and the whole
// server hangs, reads and watches too, until the disk is back. Waiting here
// instead, in a system call, the writer holds no processor and everything
// else goes on. Badger's own flushes and compactions write through maps
// too and are not covered (see docs/RATIONALE.md).
func (l *dirLock) waitWritable() {
	if l != nil && l.f != nil {
		_, _ = l.f.WriteAt(l.pid, 0)
	}
}

func (l *dirLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}

// noSpace adds store.ErrNoSpace, and what to do, to an error of a full disk.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: free space on that filesystem and start again: %w", err, store.ErrNoSpace)
	}
	return err
}
