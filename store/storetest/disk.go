package storetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
