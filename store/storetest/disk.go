package storetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// MountSmallDisk makes an ext4 filesystem of size bytes in an image file,
// mounts it (loop) on a new temporary directory and returns that directory;
// the test's cleanup unmounts it. Disk-full tests fill it for real. ext4
// rather than tmpfs: on tmpfs even reading a hole of a mapped file needs a
// free page, which a real disk does not. The test is skipped, saying why,
// where this is not possible (not root, no loop devices, no mkfs.ext4).
func MountSmallDisk(t testing.TB, size int64) string {
	t.Helper()
	tmp := t.TempDir()
	img, dir := filepath.Join(tmp, "disk.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	// -m 0: no blocks reserved for root, so that what statfs reports as
	// available is what a root process can write.
	if out, err := exec.Command("mkfs.ext4", "-q", "-m", "0", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("cannot make an ext4 image for a disk-full test (needs mkfs.ext4): %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount a %s-byte ext4 image for a disk-full test (needs root and loop devices): %v %s",
			strconv.FormatInt(size, 10), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// FreezeDisk freezes the filesystem mounted at mnt (fsfreeze -f: every
// write to it waits in the kernel, as on a journal stalled behind a full
// disk) and returns thaw, which thaws it once however often it is called;
// the test's cleanup calls it too. A process of its own, in a session of
// its own, thaws the filesystem if the test's process ends first (a
// -timeout panic, a kill): a frozen mount left behind would hold every
// later process that writes to it. The test is skipped, saying why, where
// fsfreeze is missing or not permitted.
func FreezeDisk(t testing.TB, mnt string) (thaw func()) {
	t.Helper()
	return freezeDisk(t, mnt, os.Getpid())
}

// freezeDisk is FreezeDisk with the watchdog watching the process pid.
func freezeDisk(t testing.TB, mnt string, pid int) (thaw func()) {
	t.Helper()
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("needs fsfreeze (util-linux) to stall a filesystem")
	}
	// The watchdog polls for pid and thaws mnt when it is gone.
	watchdog := exec.Command("sh", "-c", `while kill -0 "$0" 2>/dev/null; do sleep 1; done; fsfreeze -u "$1"`,
		strconv.Itoa(pid), mnt)
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watchdog.Start(); err != nil {
		t.Fatalf("start the thaw watchdog: %v", err)
	}
	watchdogDone := make(chan struct{})
	go func() { _ = watchdog.Wait(); close(watchdogDone) }()
	stopWatchdog := func() {
		_ = watchdog.Process.Kill()
		<-watchdogDone
	}
	if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
		stopWatchdog()
		t.Skipf("cannot freeze %s (fsfreeze -f not permitted here): %v %s", mnt, err, out)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			stopWatchdog()
			if err := thawFS(mnt); err != nil {
				t.Errorf("thaw %s: %v", mnt, err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// thawFS thaws the filesystem mounted at mnt (the FITHAW ioctl, which
// fsfreeze -u makes); one not frozen, thawed already, is no error.
func thawFS(mnt string) error {
	const fithaw = 0xC0045878 // _IOWR('X', 120, int)
	f, err := os.Open(mnt)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fithaw, 0); errno != 0 && errno != syscall.EINVAL {
		return fmt.Errorf("FITHAW: %w", errno)
	}
	return nil
}
