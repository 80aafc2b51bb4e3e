package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// The garbage collector deletes dependents whose owners are all gone, drops
// owner references to owners that are gone while others remain, removes the
// owner references of an owner deleted with Orphan and then its orphan
// finalizer, deletes the dependents of an owner deleted with Foreground and
// removes its foregroundDeletion finalizer once no blocking dependent is
// left, deletes the content of a terminating namespace (and objects whose
// namespace is gone) and then its finalizer, cleans up after a deleted CRD
// (crdcleanup.go), and deletes Events last updated more than EventTTL ago.
// An owner that seems missing is looked up again before anything is
// deleted, so an object created meanwhile is never collected.
//
// The work is incremental (gccollector.go): an ownership graph fed by the
// store's watch queues, for each change, only the objects it may have made
// collectable. A full mark-and-sweep of every stored object (sweep) runs
// every GCInterval as a safety net, and Events are expired by a pass over
// Events only.

// gcMaxRounds bounds the cascade of sweeps one safety-net pass runs.
const gcMaxRounds = 20

// gcFieldManager names the collector's writes (owner references and
// finalizers it removes, a CRD's Terminating condition) in managedFields.
const gcFieldManager = "setpoint-garbage-collector"

// runGC runs the incremental collector, the periodic sweep and the Event
// expiry until ctx is done.
func (s *Service) runGC(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.gc.run(ctx)
	}()
	defer func() { <-done }()
	sweep := time.NewTicker(s.opts.GCInterval)
	defer sweep.Stop()
	events := time.NewTicker(s.eventPeriod())
	defer events.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-events.C:
			if err := s.expireEvents(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("event expiry failed", "err", err)
			}
		case <-sweep.C:
			s.sweepRounds(ctx)
		}
	}
}

// eventPeriod is how often Events are expired: a tenth of EventTTL, at least
// a second, at most GCInterval.
func (s *Service) eventPeriod() time.Duration {
	return max(time.Second, min(s.opts.EventTTL/10, s.opts.GCInterval))
}

// sweepRounds sweeps until a sweep changes nothing (at most gcMaxRounds).
func (s *Service) sweepRounds(ctx context.Context) {
	for round := 0; round < gcMaxRounds && ctx.Err() == nil; round++ {
		changed, err := s.sweep(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("garbage collection sweep failed", "err", err)
			}
			return
		}
		if !changed {
			return
		}
	}
}

type gcObject struct {
	sv  *kinds.Kind
	obj *unstructured.Unstructured
}

// sweep runs one mark-and-sweep over every stored object, the collector's
// safety net, and reports whether it changed anything.
func (s *Service) sweep(ctx context.Context) (bool, error) {
	byUID := map[types.UID]*gcObject{}
	var all []*gcObject
	namespaces := map[string]*nsState{}
	for _, sv := range s.reg.GroupResources() {
		opts := store.ListOptions{Limit: 1000}
		for {
			res, err := s.store.List(ctx, store.ResourcePrefix(sv.GVR.Group, sv.GVR.Resource, ""), opts)
			if err != nil {
				return false, err
			}
			for i := range res.Items {
				u, err := decodeForGC(&res.Items[i])
				if err != nil {
					continue
				}
				o := &gcObject{sv: sv, obj: u}
				byUID[u.GetUID()] = o
				all = append(all, o)
				if sv.GVR == kinds.NamespaceResource {
					st := namespaces[u.GetName()]
					if st == nil {
						st = &nsState{}
						namespaces[u.GetName()] = st
					}
					st.terminating, st.obj = u.GetDeletionTimestamp() != nil, o
				} else if sv.Namespaced {
					st := namespaces[u.GetNamespace()]
					if st == nil {
						st = &nsState{}
						namespaces[u.GetNamespace()] = st
					}
					st.contents++
				}
			}
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
	}
	dependents := map[types.UID][]*gcObject{}
	for _, o := range all {
		for _, ref := range o.obj.GetOwnerReferences() {
			dependents[ref.UID] = append(dependents[ref.UID], o)
		}
	}
	changed := s.cleanupCRDs(ctx, all)
	for _, o := range all {
		c, err := s.collect(ctx, o, byUID, dependents, namespaces)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("garbage collection", "kind", o.sv.Kind, "namespace", o.obj.GetNamespace(), "name", o.obj.GetName(), "err", err)
		}
		changed = changed || c || apierrors.IsConflict(err)
	}
	return changed, nil
}

// nsState is what a sweep learns about one namespace.
type nsState struct {
	obj         *gcObject // the Namespace, nil when it is gone
	terminating bool
	contents    int // namespaced objects in it
}

func (s *Service) collect(ctx context.Context, o *gcObject, byUID map[types.UID]*gcObject, dependents map[types.UID][]*gcObject, namespaces map[string]*nsState) (bool, error) {
	obj, sv := o.obj, o.sv
	gvr, ns, name := sv.GVR, obj.GetNamespace(), obj.GetName()
	// A terminating namespace goes once it is empty.
	if sv.GVR == kinds.NamespaceResource {
		if st := namespaces[name]; st != nil && st.terminating && st.contents == 0 {
			return true, s.removeFinalizer(ctx, o, kinds.NamespaceFinalizer)
		}
	}
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return true, s.finishDeletion(ctx, sv, ns, name, obj.GetUID())
	}
	st := namespaces[ns]
	if handled, changed, err := s.collectInNamespace(ctx, o, st != nil && st.obj != nil, st != nil && st.terminating); handled {
		return changed, err
	}
	if sv.GVR == kinds.EventResource && s.eventExpired(obj) {
		background := metav1.DeletePropagationBackground
		_, _, err := s.DeleteObject(ctx, gvr, ns, name, metav1.DeleteOptions{PropagationPolicy: &background})
		return err == nil, err
	}
	return s.collectOwnership(ctx, o, dependents[obj.GetUID()], func(uid types.UID) bool { return byUID[uid] != nil })
}

// collectInNamespace deletes o when it is namespaced, not deleting, and its
// namespace is terminating or gone (nsPresent false is checked with a live
// read). handled tells that nothing else is to be done for o.
func (s *Service) collectInNamespace(ctx context.Context, o *gcObject, nsPresent, nsTerminating bool) (handled, changed bool, err error) {
	obj, sv := o.obj, o.sv
	ns := obj.GetNamespace()
	if !sv.Namespaced || (nsPresent && !nsTerminating) || obj.GetDeletionTimestamp() != nil {
		return false, false, nil
	}
	if !nsPresent {
		if _, err := s.store.Get(ctx, store.ObjectKey("", kinds.NamespaceResource.Resource, "", ns), store.GetOptions{}); !apierrors.IsNotFound(storeError(err, kinds.NamespaceResource.GroupResource(), ns)) {
			return true, false, nil // created since it was found missing
		}
	}
	background := metav1.DeletePropagationBackground
	_, _, err = s.DeleteObject(ctx, sv.GVR, ns, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
	return true, err == nil, err
}

// collectOwnership does what o's owner references and deletion call for:
// Orphan and Foreground deletion of o's dependents deps, and the deletion of
// o (or of its references) when its owners are gone. known tells whether an
// owner is known to exist; one that is not is looked up in the store.
func (s *Service) collectOwnership(ctx context.Context, o *gcObject, deps []*gcObject, known func(types.UID) bool) (bool, error) {
	obj, sv := o.obj, o.sv
	gvr, ns, name := sv.GVR, obj.GetNamespace(), obj.GetName()
	background := metav1.DeletePropagationBackground
	if obj.GetDeletionTimestamp() != nil {
		fins := obj.GetFinalizers()
		if slices.Contains(fins, metav1.FinalizerOrphanDependents) {
			for _, d := range deps {
				if err := s.dropOwnerRefs(ctx, d, func(r metav1.OwnerReference) bool { return r.UID == obj.GetUID() }); err != nil {
					return false, err
				}
			}
			return true, s.removeFinalizer(ctx, o, metav1.FinalizerOrphanDependents)
		}
		if slices.Contains(fins, metav1.FinalizerDeleteDependents) {
			blocking, deleted := false, false
			fg := metav1.DeletePropagationForeground
			for _, d := range deps {
				if d.obj.GetDeletionTimestamp() == nil {
					if _, _, err := s.DeleteObject(ctx, d.sv.GVR, d.obj.GetNamespace(), d.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
						return deleted, err
					}
					deleted = true
				}
				for _, r := range d.obj.GetOwnerReferences() {
					if r.UID == obj.GetUID() && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
						blocking = true
					}
				}
			}
			if !blocking {
				return true, s.removeFinalizer(ctx, o, metav1.FinalizerDeleteDependents)
			}
			return deleted, nil
		}
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return false, nil
	}
	gone := map[types.UID]bool{}
	for _, r := range refs {
		if known(r.UID) || !s.ownerGone(ctx, ns, r) {
			continue
		}
		gone[r.UID] = true
	}
	switch {
	case len(gone) == 0:
		return false, nil
	case len(gone) == len(refs):
		if obj.GetDeletionTimestamp() != nil {
			return false, nil
		}
		// The references came from the graph or a list, which may lag a
		// write that gave the object a live owner: decide on the stored
		// object (its metadata: decodeForGC), and delete only that revision
		// of it.
		kv, err := s.store.Get(ctx, key(sv, ns, name), store.GetOptions{})
		if err != nil {
			return false, storeError(err, gvr.GroupResource(), name)
		}
		cur, err := decodeForGC(kv)
		if err != nil {
			return false, err
		}
		if cur.GetUID() != obj.GetUID() || cur.GetDeletionTimestamp() != nil || !sameOwnerUIDs(cur.GetOwnerReferences(), refs) {
			return true, nil // changed since: its next event brings it back
		}
		rv := strconv.FormatInt(kv.ModRevision, 10)
		_, _, err = s.DeleteObject(ctx, gvr, ns, name, metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: ptrUID(obj.GetUID()), ResourceVersion: &rv},
		})
		return err == nil, err
	default:
		return true, s.dropOwnerRefs(ctx, o, func(r metav1.OwnerReference) bool { return gone[r.UID] })
	}
}

func ptrUID(u types.UID) *types.UID { return &u }

// sameOwnerUIDs tells whether a and b name the same owners, in order.
func sameOwnerUIDs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool { return x.UID == y.UID })
}

// finishDeletion deletes the object uid when it is still deleting with no
// finalizer left, which the write that removed its last finalizer normally
// does at once; a crash between that write and its delete leaves the
// object so. The delete is conditional on the revision read, so a write
// that adds a finalizer meanwhile keeps the object.
func (s *Service) finishDeletion(ctx context.Context, sv *kinds.Kind, ns, name string, uid types.UID) error {
	k := key(sv, ns, name)
	kv, err := s.store.Get(ctx, k, store.GetOptions{})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return storeError(err, sv.GVR.GroupResource(), name)
	}
	obj, err := sv.Decode(kv)
	if err != nil {
		return err
	}
	if obj.GetUID() != uid || obj.GetDeletionTimestamp() == nil || len(obj.GetFinalizers()) > 0 {
		return nil
	}
	if _, _, err := s.store.Delete(ctx, k, kv.ModRevision); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return storeError(err, sv.GVR.GroupResource(), name)
	}
	s.log.Info("garbage collection finished a deletion left without finalizers", "kind", sv.Kind, "namespace", ns, "name", name)
	if h := hooksOf(sv); h != nil {
		h.committed(ctx, s, nil, obj.Object)
	}
	return nil
}

// ownerGone checks with a live read that the owner a reference names is
// absent (or replaced by an object with another uid). An owner of a kind that
// is not served is never considered gone.
func (s *Service) ownerGone(ctx context.Context, ns string, r metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return false
	}
	sv, ok := s.reg.ByKind(gv.WithKind(r.Kind))
	if !ok {
		return false
	}
	if !sv.Namespaced {
		ns = ""
	}
	kv, err := s.store.Get(ctx, key(sv, ns, r.Name), store.GetOptions{})
	if err != nil {
		return apierrors.IsNotFound(storeError(err, sv.GVR.GroupResource(), r.Name))
	}
	cur, err := sv.Decode(kv)
	return err == nil && cur.GetUID() != r.UID
}

// dropOwnerRefs removes the owner references drop selects from o.
func (s *Service) dropOwnerRefs(ctx context.Context, o *gcObject, drop func(metav1.OwnerReference) bool) error {
	return s.modify(ctx, o, func(u *unstructured.Unstructured) bool {
		refs := u.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), drop)
		if len(kept) == len(refs) {
			return false
		}
		u.SetOwnerReferences(kept)
		return true
	})
}

func (s *Service) removeFinalizer(ctx context.Context, o *gcObject, f string) error {
	return s.modify(ctx, o, func(u *unstructured.Unstructured) bool {
		fins := u.GetFinalizers()
		if !slices.Contains(fins, f) {
			return false
		}
		u.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(x string) bool { return x == f }))
		return true
	})
}

// modify updates the current version of o with change, retrying conflicts.
func (s *Service) modify(ctx context.Context, o *gcObject, change func(*unstructured.Unstructured) bool) error {
	for attempt := 1; ; attempt++ {
		cur, err := s.Get(ctx, o.sv.GVR, o.obj.GetNamespace(), o.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != o.obj.GetUID() || !change(cur) {
			return nil
		}
		_, err = s.Update(ctx, o.sv.GVR, cur, metav1.UpdateOptions{FieldManager: gcFieldManager})
		if apierrors.IsConflict(err) && attempt < maxPatchAttempts {
			continue
		}
		return err
	}
}

// eventExpired tells whether an Event was last updated more than EventTTL ago
// (by lastTimestamp, eventTime or creationTimestamp, the latest present).
func (s *Service) eventExpired(ev *unstructured.Unstructured) bool {
	last := ev.GetCreationTimestamp().Time
	for _, f := range []string{"lastTimestamp", "eventTime"} {
		if v, ok, _ := unstructured.NestedString(ev.Object, f); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.After(last) {
				last = t
			}
		}
	}
	return s.opts.Now().Sub(last) > s.opts.EventTTL
}

// decodeForGC decodes what the collector needs of a stored document
// (metadata, and the timestamps that age an Event) into an unstructured
// object that holds nothing else. It decodes as the engine does, keys
// matched exactly (see exactGCMeta).
func decodeForGC(kv *store.KeyValue) (*unstructured.Unstructured, error) {
	doc, err := gcDocOf(kv.Value)
	if err != nil {
		return nil, err
	}
	md, _ := doc["metadata"].(map[string]any)
	if md == nil {
		return nil, errors.New("engine: stored document has no metadata")
	}
	m := map[string]any{"metadata": md}
	for _, k := range []string{"lastTimestamp", "eventTime"} {
		if v, ok := doc[k]; ok && v != nil {
			m[k] = v
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// gcDocOf decodes the members of a stored document decodeForGC reads. The
// sweeps decode every stored object, so it walks the document and decodes
// only those (spec and status are stepped over, as decodeGCMeta does); a
// document it cannot walk is decoded whole.
func gcDocOf(b []byte) (map[string]any, error) {
	raw := map[string][]byte{}
	d := objjson.NewScanner(b)
	walked := d.Object(func(k string) bool {
		switch k {
		case "metadata", "lastTimestamp", "eventTime":
			v, ok := d.Raw()
			raw[k] = v // the last of duplicate keys wins, as in decodeMap
			return ok
		}
		return d.Skip()
	}) && d.Done()
	if !walked {
		return kinds.DecodeMap(b)
	}
	doc := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if v[0] == '{' {
			m, err := kinds.DecodeMap(v)
			if err != nil {
				return nil, err
			}
			x = m
		} else if err := utiljson.Unmarshal(v, &x); err != nil {
			return nil, err
		}
		doc[k] = x
	}
	return doc, nil
}
