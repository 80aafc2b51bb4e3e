package storetest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// returns it; the test's cleanup unmounts it. Disk-full tests use it for a
// real small filesystem. The test is skipped, saying why, where mounting is
// not permitted (not root, or no CAP_SYS_ADMIN in a container).
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "setpoint-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a %d-byte tmpfs for a disk-full test (mounting needs root or CAP_SYS_ADMIN): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}
