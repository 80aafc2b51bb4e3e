package election_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func getLease(t *testing.T, r *replica, name string) *coordinationv1.Lease {
	t.Helper()
	u, err := r.svc.Get(context.Background(), election.Resource, election.DefaultNamespace, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease %s: %v", name, err)
	}
	l := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestOneLeaderAtATime runs three replicas campaigning for each of four
// leases for a few seconds: leaders step down after a random while
// (releasing the lease), and replicas are cut off from the store at random,
// most often a leader (their calls failing or stalling), so that leadership
// moves by release and by expiry many times. An overlap detector per lease
// counts the replicas that consider themselves its leader, from Lead's
// return until they saw its context end. It runs for 5 s, and on, up to
// 15 s, until leadership moved often enough (minTerms, minLost) for the
// check to mean something: on loaded cores fewer cuts land on a leader.
func TestOneLeaderAtATime(t *testing.T) {
	const (
		leases            = 4
		minTerms, minLost = 12, 2
	)
	rs := newReplicas(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var overlaps, terms, lost atomic.Int32
	var least atomic.Bool // the 5 s have passed
	enough := func() {
		if least.Load() && terms.Load() >= minTerms && lost.Load() >= minLost {
			cancel()
		}
	}
	defer time.AfterFunc(5*time.Second, func() { least.Store(true); enough() }).Stop()
	var holders, leader [leases]atomic.Int32
	// Half the terms last until the lease is lost, or long.
	hold := func() time.Duration {
		if rand.IntN(2) == 0 {
			return 2 * testLeaseDuration
		}
		return time.Duration(rand.IntN(500)) * time.Millisecond
	}
	var wg sync.WaitGroup
	for i, r := range rs {
		ls := newLeases(t, r, fmt.Sprintf("replica-%d", i), short)
		for k := range leases {
			el := ls.Elector(fmt.Sprintf("hammer-%d", k))
			wg.Go(func() {
				for ctx.Err() == nil {
					term, stop := context.WithCancel(ctx)
					lctx, err := el.Lead(term)
					if err != nil {
						stop()
						return
					}
					if holders[k].Add(1) > 1 {
						overlaps.Add(1)
					}
					terms.Add(1)
					leader[k].Store(int32(i))
					select {
					case <-lctx.Done():
						if errors.Is(context.Cause(lctx), election.ErrLost) {
							lost.Add(1)
						}
					case <-time.After(hold()):
					}
					enough()
					holders[k].Add(-1)
					stop() // the work stopped: release the lease
				}
			})
		}
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			r := rs[leader[rand.IntN(leases)].Load()]
			if rand.IntN(3) == 0 {
				r = rs[rand.IntN(len(rs))]
			}
			r.store.mode.Store(failing + rand.Int32N(2))
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(500+rand.IntN(1000)) * time.Millisecond):
			}
			r.store.mode.Store(connected)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	wg.Wait()
	t.Logf("%d terms, %d ended by a lost lease", terms.Load(), lost.Load())
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d times two replicas led one lease at once", n)
	}
	if terms.Load() < minTerms || lost.Load() < minLost {
		t.Fatalf("%d terms, %d lost: leadership hardly moved; the test checked little", terms.Load(), lost.Load())
	}
}

// TestCutOffLeaderStops cuts the leader off from the store: it stops
// leading within the lease duration, with ErrLost, and only then does the
// other replica take over.
func TestCutOffLeaderStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode int32
	}{
		{"writes fail", failing},
		{"writes stall", stalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newReplicas(t, 2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			el0 := newLeases(t, rs[0], "replica-0", short).Elector("work")
			el1 := newLeases(t, rs[1], "replica-1", short).Elector("work")
			lctx0, err := el0.Lead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			took := make(chan time.Time, 1)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			wg.Go(func() {
				if _, err := el1.Lead(ctx); err == nil {
					took <- time.Now()
				}
			})
			time.Sleep(200 * time.Millisecond) // renewals go on; replica-1 waits
			if lctx0.Err() != nil {
				t.Fatal("the leader stopped leading while connected")
			}
			select {
			case <-took:
				t.Fatal("replica-1 took a lease that was renewed")
			default:
			}
			cut := time.Now()
			rs[0].store.mode.Store(tc.mode)
			const leaseDuration = testLeaseDuration
			select {
			case <-lctx0.Done():
			case <-time.After(2 * leaseDuration):
				t.Fatalf("the cut-off leader still leads %v later", 2*leaseDuration)
			}
			stopped := time.Now()
			if d := stopped.Sub(cut); d >= leaseDuration {
				t.Errorf("the cut-off leader stopped %v after the cut, not within the lease duration %v", d, leaseDuration)
			}
			if cause := context.Cause(lctx0); !errors.Is(cause, election.ErrLost) {
				t.Errorf("cause %v, want ErrLost", cause)
			}
			var at time.Time
			select {
			case at = <-took:
			case <-time.After(5 * time.Second):
				t.Fatal("replica-1 did not take over")
			}
			if !at.After(stopped) {
				t.Errorf("replica-1 led at %v, before the old leader stopped at %v", at, stopped)
			}
			t.Logf("stopped %v after the cut; replica-1 took over %v after that", stopped.Sub(cut), at.Sub(stopped))
			rs[0].store.mode.Store(connected)
			l := getLease(t, rs[1], "setpoint-work")
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "replica-1" {
				t.Errorf("holder %q, want replica-1", h)
			}
			if n := ptr.Deref(l.Spec.LeaseTransitions, 0); n != 1 {
				t.Errorf("leaseTransitions %d, want 1", n)
			}
		})
	}
}

// TestReleaseHandsOverAtOnce: a leader whose context ends releases the
// lease, and a waiting replica takes it in about a retry period, far
// sooner than the 20 s lease would expire.
func TestReleaseHandsOverAtOnce(t *testing.T) {
	rs := newReplicas(t, 2)
	long := func(o election.Options) election.Options {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 20*time.Second, 10*time.Second, 50*time.Millisecond
		return o
	}
	ctx0, stop0 := context.WithCancel(context.Background())
	defer stop0()
	ctx1, stop1 := context.WithCancel(context.Background())
	defer stop1()
	el0 := newLeases(t, rs[0], "replica-0", long).Elector("work")
	el1 := newLeases(t, rs[1], "replica-1", long).Elector("work")
	if _, err := el0.Lead(ctx0); err != nil {
		t.Fatal(err)
	}
	took := make(chan time.Time, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if _, err := el1.Lead(ctx1); err == nil {
			took <- time.Now()
		}
	})
	time.Sleep(150 * time.Millisecond)
	released := time.Now()
	stop0()
	select {
	case at := <-took:
		if d := at.Sub(released); d > 2*time.Second {
			t.Errorf("takeover took %v after the release", d)
		} else {
			t.Logf("takeover %v after the release", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("replica-1 did not take over within 5s of the release (the lease lasts 20s)")
	}
	l := getLease(t, rs[1], "setpoint-work")
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "replica-1" {
		t.Errorf("holder %q, want replica-1", h)
	}
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d != 20 {
		t.Errorf("leaseDurationSeconds %d, want 20", d)
	}
	if n := ptr.Deref(l.Spec.LeaseTransitions, 0); n != 1 {
		t.Errorf("leaseTransitions %d, want 1", n)
	}
}

// TestLeaseRecord checks the fields a leader writes, as client-go's
// leader election writes them: renewals advance renewTime and keep
// acquireTime and leaseTransitions; and the leading gauge.
func TestLeaseRecord(t *testing.T) {
	rs := newReplicas(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewPedanticRegistry()
	el := newLeases(t, rs[0], "replica-0", func(o election.Options) election.Options {
		o.Registerer = reg
		return short(o)
	}).Elector("record")
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "setpoint_leader_election_leading" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["lease"] == "setpoint-record" && labels["identity"] == "replica-0" {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	if el.Name() != "setpoint-record" {
		t.Fatalf("lease name %q", el.Name())
	}
	if _, err := el.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	if g := gauge(); g != 1 {
		t.Errorf("leading gauge %v while leading, want 1", g)
	}
	first := getLease(t, rs[0], el.Name())
	if h := ptr.Deref(first.Spec.HolderIdentity, ""); h != "replica-0" {
		t.Fatalf("holder %q", h)
	}
	if d := ptr.Deref(first.Spec.LeaseDurationSeconds, 0); d != 1 {
		t.Errorf("leaseDurationSeconds %d, want 1", d)
	}
	if first.Spec.AcquireTime == nil || first.Spec.RenewTime == nil || first.Spec.LeaseTransitions == nil {
		t.Fatalf("missing fields: %+v", first.Spec)
	}
	var later *coordinationv1.Lease
	testsupport.Eventually(t, 2*time.Second, "a renewal", func() bool {
		later = getLease(t, rs[0], el.Name())
		return later.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	})
	if !later.Spec.AcquireTime.Equal(first.Spec.AcquireTime) {
		t.Errorf("acquireTime moved on renewal: %v, then %v", first.Spec.AcquireTime, later.Spec.AcquireTime)
	}
	if ptr.Deref(later.Spec.LeaseTransitions, -1) != 0 {
		t.Errorf("leaseTransitions %d after renewals, want 0", *later.Spec.LeaseTransitions)
	}
	cancel()
	testsupport.Eventually(t, 2*time.Second, "the release", func() bool {
		return getLease(t, rs[0], el.Name()).Spec.HolderIdentity == nil
	})
	testsupport.Eventually(t, 2*time.Second, "the leading gauge at 0", func() bool { return gauge() == 0 })
}

// slowRelease is an election.Client whose releases (updates that empty
// holderIdentity) take a while; it records when one succeeded.
type slowRelease struct {
	election.Client
	released *atomic.Int64 // unix nanoseconds
}

func (c slowRelease) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	h, _, _ := unstructured.NestedString(obj.Object, "spec", "holderIdentity")
	if h == "" {
		time.Sleep(100 * time.Millisecond)
	}
	out, err := c.Client.Update(ctx, gvr, obj, opts)
	if h == "" && err == nil {
		c.released.Store(time.Now().UnixNano())
	}
	return out, err
}

// TestLeadAgainAfterRelease: a replica that stops leading a lease and at
// once leads it again (a controller removed and put back) keeps it: the
// release of the first term, slow here, ends before the second term
// starts, so that it cannot empty the holder of the second, and the other
// replica never leads meanwhile.
func TestLeadAgainAfterRelease(t *testing.T) {
	rs := newReplicas(t, 2)
	var released atomic.Int64
	ls := newLeases(t, rs[0], "replica-0", func(o election.Options) election.Options {
		o.Client = slowRelease{Client: o.Client, released: &released}
		return short(o)
	})
	other := newLeases(t, rs[1], "replica-1", short).Elector("again")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term, stop := context.WithCancel(ctx)
	if _, err := ls.Elector("again").Lead(term); err != nil {
		t.Fatal(err)
	}
	stop()
	last, stop := context.WithCancel(ctx)
	defer stop()
	lctx, err := ls.Elector("again").Lead(last)
	if err != nil {
		t.Fatal(err)
	}
	if led, rel := time.Now(), released.Load(); rel == 0 || led.UnixNano() < rel {
		t.Fatalf("the second term began before the first term's release (at %d, released at %d)", led.UnixNano(), rel)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	took := make(chan struct{})
	wg.Go(func() {
		if _, err := other.Lead(ctx); err == nil {
			close(took)
		}
	})
	select {
	case <-took:
		t.Fatal("the other replica led while replica-0 leads")
	case <-lctx.Done():
		t.Fatalf("replica-0 stopped leading: %v", context.Cause(lctx))
	case <-time.After(2 * testLeaseDuration):
	}
	if h := ptr.Deref(getLease(t, rs[0], "setpoint-again").Spec.HolderIdentity, ""); h != "replica-0" {
		t.Fatalf("holder %q, want replica-0", h)
	}
}
