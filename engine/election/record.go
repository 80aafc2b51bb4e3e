package election

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/setpoint-dev/setpoint/engine"
)

// record is an elector's view of its Lease: the object last read or
// written, and when this replica saw it change.
type record struct {
	lease *coordinationv1.Lease
	// observed is when lease was first seen with its resourceVersion, on
	// this replica's monotonic clock: the lease expires LeaseDuration after
	// that, whatever the holder's clock wrote in renewTime.
	observed time.Time
}

func (r *record) set(l *coordinationv1.Lease) {
	if r.lease == nil || r.lease.ResourceVersion != l.ResourceVersion {
		r.observed = time.Now()
	}
	r.lease = l
}

func (r *record) holder() string {
	if r.lease == nil {
		return ""
	}
	return ptr.Deref(r.lease.Spec.HolderIdentity, "")
}

// valid reports whether the lease's holder may still be leading: less than
// its duration (the longer of the written one and LeaseDuration) passed
// since this replica saw it change.
func (r *record) valid(d time.Duration) bool {
	if r.lease == nil {
		return false
	}
	if s := time.Duration(ptr.Deref(r.lease.Spec.LeaseDurationSeconds, 0)) * time.Second; s > d {
		d = s
	}
	return time.Since(r.observed) < d
}

// tryAcquireOrRenew makes this replica the lease's holder, or renews it,
// with client-go leaderelection's rules: a lease held by another replica is
// taken only once it expired; acquireTime and leaseTransitions change only
// when the holder does. Every write is a compare-and-swap on the
// resourceVersion read. It reports whether this replica holds the lease.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	o := e.l.opts
	now := metav1.NewMicroTime(o.Now())
	secs := int32((o.LeaseDuration + time.Second - 1) / time.Second)
	// The fast path: renew the lease this replica holds, as last written.
	if e.rec.holder() == o.Identity && e.rec.valid(o.LeaseDuration) {
		l := e.rec.lease.DeepCopy()
		l.Spec.RenewTime = &now
		l.Spec.LeaseDurationSeconds = &secs
		if out, err := e.write(ctx, l, false); err == nil {
			e.rec.set(out)
			return true
		}
	}
	cur, err := e.get(ctx)
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: o.Namespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &o.Identity, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](0),
			},
		}
		out, err := e.write(ctx, l, true)
		if err != nil {
			return e.failed("create lease", err)
		}
		e.rec.set(out)
		return true
	}
	if err != nil {
		return e.failed("read lease", err)
	}
	e.rec.set(cur)
	holder := e.rec.holder()
	if holder != "" && holder != o.Identity && e.rec.valid(o.LeaseDuration) {
		return false
	}
	l := cur.DeepCopy()
	if holder != o.Identity {
		l.Spec.AcquireTime = &now
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.HolderIdentity = &o.Identity
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	out, err := e.write(ctx, l, false)
	if err != nil {
		return e.failed("acquire lease", err)
	}
	e.rec.set(out)
	return true
}

// failed logs err, unless it is a race lost to another replica, and
// returns false.
func (e *Elector) failed(op string, err error) bool {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		e.log.Debug(op, "err", err)
	} else {
		e.log.Warn(op, "err", err)
	}
	return false
}

// tryRelease empties the lease's holder when it is this replica, so that
// others acquire it at once, as client-go's release does.
func (e *Elector) tryRelease(ctx context.Context) error {
	o := e.l.opts
	for {
		cur, err := e.get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		e.rec.set(cur)
		if e.rec.holder() != o.Identity {
			return nil
		}
		now := metav1.NewMicroTime(o.Now())
		l := cur.DeepCopy()
		l.Spec.HolderIdentity = nil
		l.Spec.LeaseDurationSeconds = ptr.To[int32](1)
		l.Spec.AcquireTime = &now
		l.Spec.RenewTime = &now
		out, err := e.write(ctx, l, false)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		e.rec.set(out)
		return nil
	}
}

func (e *Elector) get(ctx context.Context) (*coordinationv1.Lease, error) {
	u, err := e.l.opts.Client.Get(ctx, Resource, e.l.opts.Namespace, e.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// write creates l, or updates it at its resourceVersion.
func (e *Elector) write(ctx context.Context, l *coordinationv1.Lease, create bool) (*coordinationv1.Lease, error) {
	ctx = engine.WithSystemUser(ctx, User)
	l.APIVersion, l.Kind = coordinationv1.SchemeGroupVersion.String(), "Lease"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		return nil, fmt.Errorf("election: encode Lease: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	c := e.l.opts.Client
	if create {
		u, err = c.Create(ctx, Resource, u, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		u, err = c.Update(ctx, Resource, u, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// User is the identity the electors write their Leases as: audited as
// "system:setpoint:leader-election".
var User = engine.SystemUser("system:setpoint:leader-election")

// fieldManager names the electors' writes in a Lease's managedFields.
const fieldManager = "setpoint-leader-election"

func fromUnstructured(u *unstructured.Unstructured) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		return nil, fmt.Errorf("election: decode Lease: %w", err)
	}
	return l, nil
}
