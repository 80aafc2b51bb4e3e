package storetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFreezeDiskThawsAfterOwner: a filesystem FreezeDisk froze is thawed
// by its watchdog once the process it watches is gone, as when a test's
// process is killed before its cleanup runs: a write waiting on the
// frozen filesystem then returns.
func TestFreezeDiskThawsAfterOwner(t *testing.T) {
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("needs fsfreeze (util-linux) to stall a filesystem")
	}
	mnt := MountSmallDisk(t, 16<<20)
	owner := exec.Command("sleep", "60")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Process.Kill(); _ = owner.Wait() }()
	freezeDisk(t, mnt, owner.Process.Pid)

	written := make(chan error, 1)
	go func() { written <- os.WriteFile(filepath.Join(mnt, "after"), []byte("x"), 0o600) }()
	select {
	case err := <-written:
		t.Fatalf("a write to the frozen filesystem returned at once: %v", err)
	default:
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the filesystem is still frozen 10s after the process the watchdog watches ended")
	}
}
