package election_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// TestTwoServersOnEtcd runs two replicas, each with its own client, on one
// real etcd: one of them leads; cut off, it stops within the lease
// duration and the other takes over; the second releases on stop and the
// first, reconnected, takes over again at once.
func TestTwoServersOnEtcd(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{})
	stores := make([]store.Store, 2)
	for i := range stores {
		db, err := etcd.Open(etcd.Options{Endpoints: []string{e.Endpoint}, Prefix: "/election", CompactionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		stores[i] = db
	}
	rs := startReplicas(t, stores...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type term struct {
		i    int
		lctx context.Context
		stop context.CancelFunc
		at   time.Time
	}
	leads := make(chan term, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	campaign := func(i int) {
		el := newLeases(t, rs[i], []string{"replica-0", "replica-1"}[i], short).Elector("etcd")
		wg.Go(func() {
			tctx, stop := context.WithCancel(ctx)
			lctx, err := el.Lead(tctx)
			if err != nil {
				stop()
				return
			}
			leads <- term{i: i, lctx: lctx, stop: stop, at: time.Now()}
		})
	}
	campaign(0)
	campaign(1)
	first := <-leads
	select {
	case other := <-leads:
		t.Fatalf("replica-%d and replica-%d lead at once", first.i, other.i)
	case <-time.After(2 * testLeaseDuration):
	}

	cut := time.Now()
	rs[first.i].store.mode.Store(failing)
	select {
	case <-first.lctx.Done():
	case <-time.After(2 * testLeaseDuration):
		t.Fatal("the cut-off leader still leads")
	}
	stopped := time.Now()
	if d := stopped.Sub(cut); d >= testLeaseDuration || !errors.Is(context.Cause(first.lctx), election.ErrLost) {
		t.Errorf("the cut-off leader stopped %v after the cut (cause %v), want within %v with ErrLost", d, context.Cause(first.lctx), testLeaseDuration)
	}
	first.stop()
	var second term
	select {
	case second = <-leads:
	case <-time.After(5 * time.Second):
		t.Fatal("the other replica did not take over")
	}
	if second.i == first.i || !second.at.After(stopped) {
		t.Fatalf("replica-%d led at %v; the cut-off replica-%d stopped at %v", second.i, second.at, first.i, stopped)
	}
	t.Logf("stopped %v after the cut; taken over %v later", stopped.Sub(cut), second.at.Sub(stopped))

	rs[first.i].store.mode.Store(connected)
	campaign(first.i)
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	second.stop()
	select {
	case third := <-leads:
		if third.i != first.i {
			t.Fatalf("replica-%d leads, want replica-%d", third.i, first.i)
		}
		if d := third.at.Sub(released); d >= testLeaseDuration {
			t.Errorf("takeover %v after the release, not at once", d)
		}
		third.stop()
	case <-time.After(5 * time.Second):
		t.Fatal("no takeover after the release")
	}
}
