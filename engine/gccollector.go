package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/workqueue"
	"github.com/setpoint-dev/setpoint/store"
)

// The incremental collector. One goroutine (follow) lists every served
// resource at one revision into the ownership graph, then watches the whole
// keyspace from that revision and applies each event to the graph; a watch
// that cannot resume (its revision compacted) or fails makes it list again.
// Each event adds to a work queue the uids of the objects it may have made
// collectable:
//   - an object deleted: its dependents; its owners waiting in foreground
//     deletion; its namespace when terminating; its CRD when terminating;
//   - an object added or changed: itself when it is deleting with a
//     finalizer the collector removes (orphan, foregroundDeletion, a
//     namespace's, a CRD's) or when one of its owners is not in the graph;
//     its owners waiting in foreground deletion when its owner references or
//     deletion state changed; a new object, itself when its namespace is not
//     in the graph, and its terminating namespace or CRD.
// gcWorkers goroutines take uids from the queue and attempt to collect each
// (attempt), with live reads before any delete; a failed attempt is retried
// with backoff. So the work a delete causes is proportional to what it
// affects, not to the size of the store. The graph and the queue are owned by
// the collector; the graph is guarded by mu, and its nodes are never changed
// once in it (a change replaces the node), so a worker reads a node without
// the lock.

// errNotServedYet: an object of a kind whose CRD is stored but not yet
// served here; its attempt is retried.
var errNotServedYet = errors.New("engine: kind not served here yet")

// gcWorkers is the number of goroutines attempting collections.
const gcWorkers = 2

type collector struct {
	s *Service
	q *workqueue.Queue[types.UID]

	mu sync.RWMutex
	g  *gcGraph // guarded by mu; replaced by a relist

	// rev is the store revision the graph reflects, 0 before the first list.
	rev atomic.Int64
	// relists counts the lists the graph was built from.
	relists atomic.Int64
}

func newCollector(s *Service) *collector {
	return &collector{s: s, q: newGCQueue(), g: newGCGraph()}
}

func newGCQueue() *workqueue.Queue[types.UID] {
	return workqueue.New(workqueue.Options[types.UID]{
		Name:        "garbage-collector",
		RateLimiter: workqueue.NewExponential[types.UID](10*time.Millisecond, 10*time.Second),
	})
}

// run follows the store and collects until ctx is done, and returns after
// its goroutines have stopped. A later run starts with a new queue.
func (c *collector) run(ctx context.Context) {
	defer func() { c.q = newGCQueue() }()
	var wg sync.WaitGroup
	wg.Add(1 + gcWorkers)
	go func() {
		defer wg.Done()
		c.follow(ctx)
	}()
	for range gcWorkers {
		go func() {
			defer wg.Done()
			for c.work(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.q.ShutDown()
	wg.Wait()
}

// follow lists and watches the store into the graph until ctx is done.
func (c *collector) follow(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := c.relist(ctx)
		for err == nil {
			rev, err = c.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrCompacted) {
			c.s.log.Info("garbage collector relists", "rev", rev, "err", err)
			continue
		}
		c.s.log.Warn("garbage collector watch restarts", "rev", rev, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// relist builds a new graph from a list of every served resource at one
// revision, replaces the graph with it, queues every object it shows may be
// collectable and returns the revision.
func (c *collector) relist(ctx context.Context) (int64, error) {
	g := newGCGraph()
	var rev int64
	for _, sv := range c.s.reg.GroupResources() {
		gr := sv.GVR.GroupResource()
		opts := store.ListOptions{Limit: 1000, Revision: rev}
		for {
			res, err := c.s.store.List(ctx, store.ResourcePrefix(gr.Group, gr.Resource, ""), opts)
			if err != nil {
				return 0, err
			}
			if rev == 0 {
				rev = res.Revision
			}
			for i := range res.Items {
				if m, ok := decodeGCMeta(res.Items[i].Value); ok {
					g.put(g.node(gr, &m))
				}
			}
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
	}
	var add []types.UID
	for _, n := range g.nodes {
		switch {
		case n.acting(), n.stranded(), g.ownersMissing(n):
			add = append(add, n.uid)
		case n.namespace != "":
			if ns := g.namespaces[n.namespace]; ns == nil {
				add = append(add, n.uid)
			} else if ns.deleting() {
				add = append(add, ns.uid)
			}
		}
	}
	c.mu.Lock()
	c.g = g
	c.mu.Unlock()
	c.rev.Store(rev)
	c.relists.Add(1)
	for _, uid := range add {
		c.q.Add(uid)
	}
	return rev, nil
}

// watch applies the store's events after rev to the graph and returns the
// revision it reached; a nil error means the watch may resume from there.
func (c *collector) watch(ctx context.Context, rev int64) (int64, error) {
	w, err := storeWatch(ctx, c.s.store, "/", rev)
	if err != nil {
		return rev, err
	}
	defer w.Stop()
	for ev := range w.Events() {
		c.apply(ev)
		rev = ev.Revision()
		c.rev.Store(rev)
	}
	if err := w.Err(); err != nil && !errors.Is(err, store.ErrWatcherTooSlow) {
		return rev, err
	}
	return rev, ctx.Err()
}

// apply applies one store event to the graph and queues what it may have
// made collectable.
func (c *collector) apply(ev store.Event) {
	gr, ok := grFromKey(ev.Object.Key)
	if !ok {
		return
	}
	m, ok := decodeGCMeta(ev.Object.Value)
	if !ok {
		return
	}
	var add []types.UID
	c.mu.Lock()
	g := c.g
	n := g.node(gr, &m)
	if ev.Type == store.Deleted {
		g.remove(n.uid)
		for d := range g.dependents[n.uid] {
			add = append(add, d.uid)
		}
		add = c.ownersWaiting(g, n, nil, add)
		add = c.containersWaiting(g, n, add)
	} else {
		old := g.put(n)
		ownersChanged := old == nil || !sameOwners(old.owners, n.owners)
		if n.acting() || n.stranded() || ownersChanged && g.ownersMissing(n) {
			add = append(add, n.uid)
		}
		if ownersChanged || old.flags != n.flags {
			add = c.ownersWaiting(g, n, old, add)
		}
		if old == nil {
			if n.namespace != "" && g.namespaces[n.namespace] == nil {
				add = append(add, n.uid)
			}
			add = c.containersWaiting(g, n, add)
		} else if old.deleting() && n.deleting() && n.namespace != "" {
			// A deleting object changed (one of its finalizers went): the
			// conditions of its terminating namespace may say otherwise now.
			if ns := g.namespaces[n.namespace]; ns != nil && ns.deleting() {
				add = append(add, ns.uid)
			}
		}
	}
	c.mu.Unlock()
	for _, uid := range add {
		c.q.Add(uid)
	}
}

// ownersWaiting appends the owners of n (and of old, its previous version)
// that are deleting with a finalizer the collector removes: their wait may
// be over.
func (c *collector) ownersWaiting(g *gcGraph, n, old *gcNode, add []types.UID) []types.UID {
	for _, x := range []*gcNode{n, old} {
		if x == nil {
			continue
		}
		for _, o := range x.owners {
			if on := g.nodes[o.uid]; on != nil && on.acting() {
				add = append(add, on.uid)
			}
		}
	}
	return add
}

// containersWaiting appends the terminating namespace of n and the
// terminating CRD of n's resource.
func (c *collector) containersWaiting(g *gcGraph, n *gcNode, add []types.UID) []types.UID {
	if n.namespace != "" {
		if ns := g.namespaces[n.namespace]; ns != nil && ns.deleting() {
			add = append(add, ns.uid)
		}
	}
	for _, crd := range g.crds {
		if crd.acting() {
			if sv := c.s.servedGR(n.res.gr); sv != nil && sv.CRD != "" {
				if cn := g.crds[sv.CRD]; cn != nil && cn.acting() {
					add = append(add, cn.uid)
				}
			}
			break
		}
	}
	return add
}

// work attempts one queued uid; false once the queue is shut down.
func (c *collector) work(ctx context.Context) bool {
	uid, shutdown := c.q.Get()
	if shutdown {
		return false
	}
	defer c.q.Done(uid)
	err := c.attempt(ctx, uid)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		c.q.Forget(uid)
	case ctx.Err() != nil:
	default:
		if !apierrors.IsConflict(err) && !errors.Is(err, errNotServedYet) {
			c.s.log.Warn("garbage collection", "uid", string(uid), "err", err)
		}
		c.q.AddRateLimited(uid)
	}
	return true
}

// known tells whether the graph holds uid.
func (c *collector) known(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.nodes[uid] != nil
}

// attempt collects what the object uid calls for, as one step of the sweep
// (collect) does for it, reading the graph instead of a list of the store.
func (c *collector) attempt(ctx context.Context, uid types.UID) error {
	c.mu.RLock()
	n := c.g.nodes[uid]
	var deps []*gcNode
	var ns *gcNode
	if n != nil {
		if n.acting() {
			for d := range c.g.dependents[uid] {
				deps = append(deps, d)
			}
		}
		if n.namespace != "" {
			ns = c.g.namespaces[n.namespace]
		}
	}
	c.mu.RUnlock()
	if n == nil {
		return nil
	}
	s := c.s
	sv := s.servedGR(n.res.gr)
	if sv == nil {
		// A kind whose CRD this server has not caught up with yet (another
		// server created it): try again once it is served. Keys of anything
		// else (modules) are never the collector's.
		c.mu.RLock()
		crd := c.g.crds[n.res.gr.String()] // a CRD is named resource.group
		c.mu.RUnlock()
		if crd != nil && !crd.deleting() {
			return fmt.Errorf("%w: %s", errNotServedYet, n.res.gr)
		}
		return nil
	}
	if n.stranded() {
		return s.finishDeletion(ctx, sv, n.namespace, n.name, n.uid)
	}
	o := gcObjectOf(sv, n)
	if sv.GVR == kinds.CRDResource && n.acting() && n.flags&gcCRDCleanupFin != 0 {
		if _, err := s.cleanupCRD(ctx, o, s.listGROf); err != nil {
			return err
		}
	}
	if sv.GVR == kinds.NamespaceResource && n.deleting() {
		if done, err := s.emptyNamespace(ctx, o); done || err != nil {
			return err
		}
	}
	if handled, _, err := s.collectInNamespace(ctx, o, ns != nil, ns != nil && ns.deleting()); handled {
		return err
	}
	dobjs := make([]*gcObject, 0, len(deps))
	for _, d := range deps {
		if dsv := s.servedGR(d.res.gr); dsv != nil {
			dobjs = append(dobjs, gcObjectOf(dsv, d))
		}
	}
	_, err := s.collectOwnership(ctx, o, dobjs, c.known)
	return err
}

// gcObjectOf builds the object a node stands for, metadata only.
func gcObjectOf(sv *kinds.Kind, n *gcNode) *gcObject {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetUID(n.uid)
	u.SetName(n.name)
	if n.namespace != "" {
		u.SetNamespace(n.namespace)
	}
	if n.deleting() {
		t := metav1.NewTime(time.Unix(0, 0))
		u.SetDeletionTimestamp(&t)
	}
	var fins []string
	for _, f := range []struct {
		flag uint8
		name string
	}{{gcOrphanFin, metav1.FinalizerOrphanDependents}, {gcForegroundFin, metav1.FinalizerDeleteDependents},
		{gcNamespaceFin, kinds.NamespaceFinalizer}, {gcCRDCleanupFin, apiextensionsv1.CustomResourceCleanupFinalizer}} {
		if n.flags&f.flag != 0 {
			fins = append(fins, f.name)
		}
	}
	if fins != nil {
		u.SetFinalizers(fins)
	}
	if len(n.owners) > 0 {
		refs := make([]metav1.OwnerReference, len(n.owners))
		for i, o := range n.owners {
			block := o.block
			refs[i] = metav1.OwnerReference{APIVersion: o.kind.apiVersion, Kind: o.kind.kind, Name: o.name, UID: o.uid, BlockOwnerDeletion: &block}
		}
		u.SetOwnerReferences(refs)
	}
	return &gcObject{sv: sv, obj: u}
}

// servedGR returns the served version of gr the sweep would walk (the first
// by GroupVersionResource string), nil when gr is not served.
func (s *Service) servedGR(gr schema.GroupResource) *kinds.Kind {
	return s.reg.ByGroupResource(gr)
}

// listGC lists the objects under prefix of sv's resource, metadata only.
func (s *Service) listGC(ctx context.Context, sv *kinds.Kind, prefix string) ([]*gcObject, error) {
	var out []*gcObject
	opts := store.ListOptions{Limit: 1000}
	for {
		res, err := s.store.List(ctx, prefix, opts)
		if err != nil {
			return nil, storeError(err, sv.GVR.GroupResource(), "")
		}
		for i := range res.Items {
			if u, err := decodeForGC(&res.Items[i]); err == nil {
				out = append(out, &gcObject{sv: sv, obj: u})
			}
		}
		if res.Continue == "" {
			return out, nil
		}
		opts.Continue = res.Continue
	}
}

// listGROf lists every object of a resource, metadata only: what the cleanup
// of a CRD being deleted works on.
func (s *Service) listGROf(ctx context.Context, gr schema.GroupResource) ([]*gcObject, error) {
	sv := s.servedGR(gr)
	if sv == nil {
		return nil, nil
	}
	return s.listGC(ctx, sv, store.ResourcePrefix(gr.Group, gr.Resource, ""))
}

// emptyNamespace deletes the content of the terminating namespace o and,
// once none is left, removes its finalizer (done). On the way it keeps the
// namespace's status conditions as Kubernetes' namespace controller does
// (setNamespaceConditions): what remains, held by which finalizers, and
// which deletes failed.
func (s *Service) emptyNamespace(ctx context.Context, o *gcObject) (done bool, err error) {
	ns := o.obj.GetName()
	background := metav1.DeletePropagationBackground
	var content nsContent
	for _, sv := range s.reg.GroupResources() {
		if !sv.Namespaced {
			continue
		}
		gr := sv.GVR.GroupResource()
		objs, err := s.listGC(ctx, sv, store.ResourcePrefix(sv.GVR.Group, sv.GVR.Resource, ns))
		if err != nil {
			content.failed(err)
			continue
		}
		for _, x := range objs {
			if x.obj.GetDeletionTimestamp() != nil {
				content.remains(gr, x.obj.GetFinalizers()) // waiting for its finalizers
				continue
			}
			out, deleted, err := s.DeleteObject(ctx, sv.GVR, ns, x.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
			switch {
			case apierrors.IsNotFound(err):
			case apierrors.IsConflict(err):
				content.remains(gr, x.obj.GetFinalizers())
			case err != nil:
				content.failed(err)
				content.remains(gr, x.obj.GetFinalizers())
			case !deleted:
				content.remains(gr, out.GetFinalizers())
			}
		}
	}
	final := content.empty() && len(content.errs) == 0
	if err := s.setNamespaceConditions(ctx, o, content.conditions(), final); err != nil {
		return false, err
	}
	if len(content.errs) > 0 {
		return false, content.errs[0] // retried with backoff
	}
	if !final {
		return false, nil // the deletes of its content queue it again
	}
	return true, s.removeFinalizer(ctx, o, kinds.NamespaceFinalizer)
}

// nsContent is what emptyNamespace found left in a namespace.
type nsContent struct {
	remaining  map[schema.GroupResource]int
	finalizers map[string]int
	errs       []error
}

func (c *nsContent) remains(gr schema.GroupResource, finalizers []string) {
	if c.remaining == nil {
		c.remaining, c.finalizers = map[schema.GroupResource]int{}, map[string]int{}
	}
	c.remaining[gr]++
	for _, f := range finalizers {
		c.finalizers[f]++
	}
}

func (c *nsContent) failed(err error) { c.errs = append(c.errs, err) }

func (c *nsContent) empty() bool { return len(c.remaining) == 0 }

// namespaceConditionTypes are the conditions Kubernetes' namespace controller
// keeps on a terminating namespace, in its order, each with the reason and
// message of its false ("all is well") state.
var namespaceConditionTypes = []struct {
	t               corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// conditions returns the true conditions c calls for, by type, with the
// reasons and messages of Kubernetes' namespace controller. Setpoint serves
// its kinds from its own registry, so discovery and group versions never
// fail.
func (c *nsContent) conditions() map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	out := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	if len(c.errs) > 0 {
		msgs := make([]string, len(c.errs))
		for i, err := range c.errs {
			msgs[i] = err.Error()
		}
		sort.Strings(msgs)
		out[corev1.NamespaceDeletionContentFailure] = corev1.NamespaceCondition{
			Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(c.errs), strings.Join(msgs, ", ")),
		}
	}
	if len(c.remaining) > 0 {
		var parts []string
		for gr, n := range c.remaining {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gr.Resource, gr.Group, n))
		}
		sort.Strings(parts)
		out[corev1.NamespaceContentRemaining] = corev1.NamespaceCondition{
			Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: " + strings.Join(parts, ", "),
		}
	}
	if len(c.finalizers) > 0 {
		var parts []string
		for f, n := range c.finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		out[corev1.NamespaceFinalizersRemaining] = corev1.NamespaceCondition{
			Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain",
			Message: "Some content in the namespace has finalizers remaining: " + strings.Join(parts, ", "),
		}
	}
	return out
}

// setNamespaceConditions writes the namespace conditions into the status of
// o, the true ones given by type and the others false, when that changes
// any condition's status, reason or message (a condition's
// lastTransitionTime moves only with its status), so an unchanged namespace
// costs no write. final says the namespace is empty: when its finalizer is
// its last, removing it deletes the namespace, and the all-clear is not
// written for nobody to read.
func (s *Service) setNamespaceConditions(ctx context.Context, o *gcObject, conds map[corev1.NamespaceConditionType]corev1.NamespaceCondition, final bool) error {
	for attempt := 1; ; attempt++ {
		cur, err := s.Get(ctx, kinds.NamespaceResource, "", o.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != o.obj.GetUID() || cur.GetDeletionTimestamp() == nil {
			return nil
		}
		if fins := cur.GetFinalizers(); final && len(fins) == 1 && fins[0] == kinds.NamespaceFinalizer {
			return nil
		}
		if !mergeNamespaceConditions(cur.Object, conds, metav1.NewTime(s.opts.Now())) {
			return nil
		}
		_, err = s.UpdateStatus(ctx, kinds.NamespaceResource, cur, metav1.UpdateOptions{FieldManager: gcFieldManager})
		if apierrors.IsConflict(err) && attempt < maxPatchAttempts {
			continue
		}
		return err
	}
}

// mergeNamespaceConditions sets the conditions of namespaceConditionTypes
// in the status of the namespace ns (an object's map): the ones in conds as
// given, the others false with their "all is well" reason. It keeps other
// conditions and the order of those present, and reports whether anything
// but a lastTransitionTime changed.
func mergeNamespaceConditions(ns map[string]any, conds map[corev1.NamespaceConditionType]corev1.NamespaceCondition, now metav1.Time) bool {
	var status corev1.NamespaceStatus
	if m, ok := ns["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &status); err != nil {
			status = corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}
		}
	}
	changed := false
	for _, ct := range namespaceConditionTypes {
		want, ok := conds[ct.t]
		if !ok {
			want = corev1.NamespaceCondition{Type: ct.t, Status: corev1.ConditionFalse, Reason: ct.reason, Message: ct.message}
		}
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == ct.t })
		if i < 0 {
			want.LastTransitionTime = now
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		have := &status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		if have.Status != want.Status {
			have.LastTransitionTime = now
		}
		have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	if !changed {
		return false
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return false
	}
	ns["status"] = m
	return true
}

// expireEvents deletes the Events last updated more than EventTTL ago.
func (s *Service) expireEvents(ctx context.Context) error {
	sv := s.servedGR(kinds.EventResource.GroupResource())
	if sv == nil {
		return nil
	}
	evs, err := s.listGC(ctx, sv, store.ResourcePrefix(kinds.EventResource.Group, kinds.EventResource.Resource, ""))
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, ev := range evs {
		if !s.eventExpired(ev.obj) {
			continue
		}
		uid := ev.obj.GetUID()
		_, _, err := s.DeleteObject(ctx, kinds.EventResource, ev.obj.GetNamespace(), ev.obj.GetName(), metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
