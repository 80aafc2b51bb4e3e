package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// The Plugin installed right after an upload is served by the version the
// upload's check loaded, when its limits allow; otherwise by a new load.
// The modules are the small C and Rust Widget plugins: what is checked is
// which version serves, and a Go guest's compile under the race detector
// (a minute or more of a loaded machine, each) would only test the
// compile timeout.
func TestInstallAdoptsCheckedVersion(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	reg := host.NewRegistry(h)
	t.Cleanup(func() { _ = reg.Close() })
	a := hostAdapter{h: h, reg: reg, checked: &checkedVersion{}}
	ctx := context.Background()
	wasm := hosttest.Module(t, "widget-c")

	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	checked := a.checked.p
	if checked == nil {
		t.Fatal("Check kept no version")
	}
	if _, err := a.Install(ctx, "first", wasm, host.Digest(wasm), plugins.Config{Read: []string{"ConfigMap"}}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Get("first"); got != checked || got.Name() != "first" {
		t.Fatalf("first is served by %p (%s), want the checked version %p renamed", got, got.Name(), checked)
	}
	if a.checked.p != nil {
		t.Fatal("the adopted version is still held")
	}

	// Other limits: a new load, and the checked version is closed.
	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	checked = a.checked.p
	if _, err := a.Install(ctx, "second", wasm, host.Digest(wasm), plugins.Config{CallTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Get("second"); got == checked || got.Name() != "second" {
		t.Fatalf("second is served by the checked version (%s), want a new load", got.Name())
	}
	if a.checked.p != nil {
		t.Fatal("a version of the installed module is still held")
	}

	// A module the check did not load: a new load, the held version stays
	// for its own Plugin.
	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	other := hosttest.Module(t, "widget-rust")
	if _, err := a.Install(ctx, "third", other, host.Digest(other), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Get("third"); got == a.checked.p || got.Digest() != host.Digest(other) {
		t.Fatal("third is not served by its own module")
	}
	if a.checked.p == nil {
		t.Fatal("the checked version of another module was dropped")
	}
}

// A checked version is dropped once it has waited checkedKeep, and when
// its owner's run stops; after that, keep closes what it is given.
func TestCheckedVersionExpiresAndStops(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	reg := host.NewRegistry(h)
	t.Cleanup(func() { _ = reg.Close() })
	now := time.Unix(1_000_000, 0)
	c := &checkedVersion{now: func() time.Time { return now }}
	a := hostAdapter{h: h, reg: reg, checked: c}
	ctx := context.Background()
	wasm := hosttest.Module(t, "widget-c") // small: see TestInstallAdoptsCheckedVersion

	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(checkedKeep - time.Second)
	c.expire()
	if c.p == nil {
		t.Fatal("the checked version was dropped before checkedKeep")
	}
	now = now.Add(time.Second)
	c.expire()
	if c.p != nil {
		t.Fatal("the checked version is held after checkedKeep")
	}
	if p := c.take(host.Digest(wasm)); p != nil {
		t.Fatal("take handed over an expired version")
	}

	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	held := c.p
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.run(runCtx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if c.p != nil {
		t.Fatal("the checked version is held after run stopped")
	}
	if err := held.Prewarm(ctx, 1); !errors.Is(err, host.ErrClosed) {
		t.Errorf("the version held when run stopped: Prewarm = %v, want %v", err, host.ErrClosed)
	}
	if err := a.Check(ctx, wasm, host.Digest(wasm), plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	if c.p != nil {
		t.Fatal("a version checked after run stopped is held")
	}
}

// Check and Stage key the version by the digest they are given, which the
// upload computed or the store verified, and do not hash the module again:
// a version loaded with a made-up digest reports that digest, and the
// checked version is found by it. The host has a cache of its own: what
// it derives from the module is kept under the made-up digest.
func TestCheckAndStageTakeTheGivenDigest(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{CacheDir: t.TempDir()})
	reg := host.NewRegistry(h)
	t.Cleanup(func() { _ = reg.Close() })
	a := hostAdapter{h: h, reg: reg, checked: &checkedVersion{}}
	ctx := context.Background()
	wasm := hosttest.Module(t, "widget-c") // small: see TestInstallAdoptsCheckedVersion
	given := "sha256:" + strings.Repeat("0", 64)
	if given == host.Digest(wasm) {
		t.Fatal("the made-up digest is the module's")
	}

	if err := a.Check(ctx, wasm, given, plugins.Config{}); err != nil {
		t.Fatal(err)
	}
	checked := a.checked.p
	if checked == nil || checked.Digest() != given {
		t.Fatalf("the checked version has digest %v, want the given %s", checked, given)
	}
	c, err := a.Stage(ctx, "p", wasm, given, plugins.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := reg.Get("p"); got != checked {
		t.Fatalf("p is served by %p, want the version checked under the given digest %p", got, checked)
	}

	c, err = a.Stage(ctx, "q", wasm, given, plugins.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := reg.Get("q"); got == checked || got.Digest() != given {
		t.Fatalf("q (a new load) has digest %s, want the given %s", got.Digest(), given)
	}
}
