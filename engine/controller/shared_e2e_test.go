package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// state returns the status.state the gizmo plugin reported for widget name.
func state(t *testing.T, c controller.Client, name string) string {
	t.Helper()
	s, _, _ := unstructured.NestedString(get(t, c, widgets, name).Object, "status", "state")
	return s
}

// caches checks how many lists and watches the controllers started, and
// how many watches are open, per resource.
func caches(t *testing.T, c *instrumented, lists, open int) {
	t.Helper()
	for _, res := range []string{"widgets", "gizmos"} {
		if n := c.Lists(res); n != lists {
			t.Errorf("lists of %s = %d, want %d", res, n, lists)
		}
		if n := c.OpenWatches(res); n != open {
			t.Errorf("open watches of %s = %d, want %d", res, n, open)
		}
	}
}

// Two controllers of the same kind that own the same kind keep one cache
// of each: one list and one watch per kind. The caches run while either
// controller does and stop with the last one.
func TestManagerSharesInformers(t *testing.T) {
	c := instrument(newEngine(t))
	a, b := &gizmoPlugin{}, &gizmoPlugin{}
	m, stop := runManager(t, newController(t, c, "a", a, nil), newController(t, c, "b", b, nil))

	create(t, c, widgets, newWidget("w1", "small"))
	testsupport.Eventually(t, 10*time.Second, "w1 Ready, reconciled by both", func() bool {
		return isReady(t, c, "w1") && a.calls.Load() > 0 && b.calls.Load() > 0
	})
	caches(t, c, 1, 1)
	if n := c.Watches(); n != 2 {
		t.Errorf("watches = %d, want 2", n)
	}

	// Without a, b still gets every change from the caches a started.
	m.Remove("a")
	calls := b.calls.Load()
	create(t, c, widgets, newWidget("w2", "small"))
	testsupport.Eventually(t, 10*time.Second, "w2 Ready", func() bool { return isReady(t, c, "w2") && b.calls.Load() > calls })
	caches(t, c, 1, 1)

	m.Remove("b")
	testsupport.Eventually(t, 10*time.Second, "caches stopped", func() bool {
		return c.OpenWatches("widgets") == 0 && c.OpenWatches("gizmos") == 0
	})
	caches(t, c, 1, 0)
	stop()
}

// A controller added while others run gets the objects they have cached,
// as new, and reconciles them without listing or an event.
func TestManagerLateControllerGetsCache(t *testing.T) {
	c := instrument(newEngine(t))
	m, stop := runManager(t, newController(t, c, "a", &gizmoPlugin{}, nil))
	create(t, c, widgets, newWidget("w1", "small"))
	create(t, c, widgets, newWidget("w2", "small"))
	testsupport.Eventually(t, 10*time.Second, "w1 and w2 Ready", func() bool { return isReady(t, c, "w1") && isReady(t, c, "w2") })

	late := &gizmoPlugin{}
	m.Put(newController(t, c, "late", late, nil))
	testsupport.Eventually(t, 10*time.Second, "late reconciled w1 and w2", func() bool { return late.calls.Load() >= 2 })
	caches(t, c, 1, 1)
	stop()
	caches(t, c, 1, 0) // Run returned: the caches have stopped
}

// A controller replaced by Put (a hot swap) hands its caches to its
// successor: nothing is listed again, and the successor reconciles every
// cached object.
func TestManagerHotSwapKeepsCache(t *testing.T) {
	c := instrument(newEngine(t))
	m, stop := runManager(t, newController(t, c, "a", &gizmoPlugin{state: "v1"}, nil))
	create(t, c, widgets, newWidget("w1", "small"))
	create(t, c, widgets, newWidget("w2", "small"))
	testsupport.Eventually(t, 10*time.Second, "state v1", func() bool { return state(t, c, "w1") == "v1" && state(t, c, "w2") == "v1" })
	caches(t, c, 1, 1)

	m.Put(newController(t, c, "a", &gizmoPlugin{state: "v2"}, nil))
	testsupport.Eventually(t, 10*time.Second, "state v2", func() bool { return state(t, c, "w1") == "v2" && state(t, c, "w2") == "v2" })
	caches(t, c, 1, 1)
	if n := c.Watches(); n != 2 {
		t.Errorf("watches = %d, want 2", n)
	}
	stop()
	caches(t, c, 1, 0)
}

// A controller run without a Manager keeps caches of its own and stops
// them before Run returns.
func TestControllerRunAlone(t *testing.T) {
	c := instrument(newEngine(t))
	ctl := newController(t, c, "alone", &gizmoPlugin{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	create(t, c, widgets, newWidget("w1", "small"))
	testsupport.Eventually(t, 10*time.Second, "w1 Ready", func() bool { return isReady(t, c, "w1") })
	caches(t, c, 1, 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	caches(t, c, 1, 0)
}

// A successor finds the shared cache as its predecessor left it, possibly
// behind the predecessor's last writes; it inherits the record of those
// writes, so it does not take the cached status for the stored one. Here
// v2's status write is held back from the cache when v1 comes back: v1 must
// still put its own status back.
func TestManagerHotSwapInheritsOwnWrites(t *testing.T) {
	c := instrument(newEngine(t))
	m, stop := runManager(t, newController(t, c, "a", &gizmoPlugin{state: "v1"}, nil))
	create(t, c, widgets, newWidget("w1", "small"))
	testsupport.Eventually(t, 10*time.Second, "state v1", func() bool { return isReady(t, c, "w1") && state(t, c, "w1") == "v1" })

	release := sync.OnceFunc(c.Hold("widgets"))
	defer release()
	m.Put(newController(t, c, "a", &gizmoPlugin{state: "v2"}, nil))
	testsupport.Eventually(t, 10*time.Second, "state v2 stored", func() bool { return state(t, c, "w1") == "v2" })
	m.Put(newController(t, c, "a", &gizmoPlugin{state: "v1"}, nil))
	testsupport.Eventually(t, 10*time.Second, "state v1 stored again", func() bool { return state(t, c, "w1") == "v1" })
	release()
	caches(t, c, 1, 1)
	stop()
}
