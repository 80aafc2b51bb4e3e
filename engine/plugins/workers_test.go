package plugins

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestReconcileWorkers: a Plugin's controller reconciles at most
// spec.reconcile.workers objects at once, and DefaultWorkers without it; a
// change of the number restarts the controller with the new one.
func TestReconcileWorkers(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		inflight int
		peak     int
		gateCh   chan struct{} // reconcile calls wait until it is closed
	)
	h := &reconcileHost{fakeHost: &fakeHost{current: map[string]string{}}, calls: map[string]int{}}
	h.gate = func(ctx context.Context) error {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		ch := gateCh
		mu.Unlock()
		defer func() {
			mu.Lock()
			inflight--
			mu.Unlock()
		}()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p := startReconcileHost(t, db, h)
	defer p.stop()
	module := []byte("module")
	if _, err := NewModules(db).Put(ctx, digestOf(module), module); err != nil {
		t.Fatal(err)
	}
	notes := DefaultWorkers() + 8
	for i := range notes {
		createNote(t, p.svc, fmt.Sprintf("n%02d", i))
	}

	// phase holds the calls until want run at once, checks that no more
	// than want ever do, then lets every call through and waits until the
	// controller is idle.
	phase := func(what string, want int, change func()) {
		t.Helper()
		mu.Lock()
		gateCh, peak = make(chan struct{}), 0
		mu.Unlock()
		change()
		testsupport.Poll(t, 15*time.Second, fmt.Sprintf("%s: %d reconciles at once", what, want), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return inflight == want, fmt.Sprintf("%d at once", inflight)
		})
		time.Sleep(300 * time.Millisecond) // room for a worker too many
		mu.Lock()
		got := peak
		close(gateCh)
		mu.Unlock()
		if got != want {
			t.Fatalf("%s: %d reconciles ran at once, want %d", what, got, want)
		}
		last, quiet := -1, 0
		testsupport.Poll(t, 15*time.Second, what+": the controller idle", func() (bool, string) {
			mu.Lock()
			n := inflight
			mu.Unlock()
			c := h.callsOf("w")
			if n == 0 && c == last {
				quiet++
			} else {
				quiet = 0
			}
			last = c
			return quiet >= 5, fmt.Sprintf("%d in flight, %d calls", n, c)
		})
	}
	setWorkers := func(n int) func() {
		return func() {
			obj, err := p.svc.Get(ctx, Resource, "", "w", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				err = unstructured.SetNestedField(obj.Object, int64(n), "spec", "reconcile", "workers")
			} else {
				unstructured.RemoveNestedField(obj.Object, "spec", "reconcile", "workers")
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.svc.Update(ctx, Resource, obj, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase("workers 3", 3, func() {
		pl := reconcilePlugin("w", digestOf(module))
		if err := unstructured.SetNestedField(pl.Object, int64(3), "spec", "reconcile", "workers"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.svc.Create(ctx, Resource, pl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	phase("workers 7", 7, setWorkers(7))
	phase("default workers", DefaultWorkers(), setWorkers(0))

	// Out of range: refused by the Plugin's schema.
	obj, err := p.svc.Get(ctx, Resource, "", "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int64{0, MaxWorkers + 1} {
		_ = unstructured.SetNestedField(obj.Object, bad, "spec", "reconcile", "workers")
		if _, err := p.svc.Update(ctx, Resource, obj, metav1.UpdateOptions{}); err == nil {
			t.Errorf("spec.reconcile.workers %d was accepted", bad)
		}
	}
}
