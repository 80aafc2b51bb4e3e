package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// collectInNamespace deletes o when it is namespaced, not deleting, and its
// namespace is terminating or gone (nsPresent false is checked with a live
// read). handled tells that nothing else is to be done for o.
func (c *Collector) collectInNamespace(ctx context.Context, o *gcObject, nsPresent, nsTerminating bool) (handled, changed bool, err error) {
	obj, r := o.obj, o.res
	ns := obj.GetNamespace()
	if !r.Namespaced || (nsPresent && !nsTerminating) || obj.GetDeletionTimestamp() != nil {
		return false, false, nil
	}
	if !nsPresent {
		if _, err := c.st.Get(ctx, store.ObjectKey("", kinds.NamespaceResource.Resource, "", ns), store.GetOptions{}); !errors.Is(err, store.ErrNotFound) {
			return true, false, nil // created since it was found missing
		}
	}
	background := metav1.DeletePropagationBackground
	_, _, err = c.svc.DeleteObject(ctx, r.GVR, ns, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
	return true, err == nil, err
}

// emptyNamespace deletes the content of the terminating namespace o and,
// once none is left, finalizes it (finalizeNamespace), as Kubernetes'
// namespace controller does for a namespace whose spec.finalizers hold
// kubernetes; done says there is nothing else to do for o now (it is
// gone, or finalized). On the way
// it keeps the namespace's status conditions as that controller does
// (setNamespaceConditions): what remains, held by which finalizers, and
// which deletes failed. A namespace kubernetes does not hold (it was
// finalized by hand, or never held) is left to the rest of the collection:
// finished once no finalizer is left (FinishDeletion), its content
// collected once it is gone.
func (c *Collector) emptyNamespace(ctx context.Context, o *gcObject) (done bool, err error) {
	ns := o.obj.GetName()
	cur, err := c.svc.Get(ctx, kinds.NamespaceResource, "", ns, metav1.GetOptions{})
	if err != nil {
		return apierrors.IsNotFound(err), err
	}
	if cur.GetUID() != o.obj.GetUID() || cur.GetDeletionTimestamp() == nil {
		return true, nil
	}
	if !heldByKubernetes(cur) {
		return false, nil
	}
	background := metav1.DeletePropagationBackground
	var content nsContent
	for _, r := range c.svc.GroupResources() {
		if !r.Namespaced {
			continue
		}
		gr := r.GVR.GroupResource()
		objs, err := c.listGC(ctx, r, store.ResourcePrefix(r.GVR.Group, r.GVR.Resource, ns))
		if err != nil {
			content.failed(err)
			continue
		}
		for _, x := range objs {
			if x.obj.GetDeletionTimestamp() != nil {
				content.remains(gr, x.obj.GetFinalizers()) // waiting for its finalizers
				continue
			}
			out, deleted, err := c.svc.DeleteObject(ctx, r.GVR, ns, x.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
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
	if err := c.setNamespaceConditions(ctx, o, content.conditions(), final); err != nil {
		return false, err
	}
	if len(content.errs) > 0 {
		return false, content.errs[0] // retried with backoff
	}
	if !final {
		return false, nil // the deletes of its content queue it again
	}
	_, err = c.finalizeNamespace(ctx, o)
	return true, err
}

// heldByKubernetes tells whether the namespace ns waits for its content to
// be deleted: kubernetes in its spec.finalizers or, as namespaces deleted
// by earlier Setpoint versions are held, in metadata.finalizers.
func heldByKubernetes(ns *unstructured.Unstructured) bool {
	return slices.Contains(kinds.NamespaceSpecFinalizers(ns.Object), kinds.NamespaceFinalizer) ||
		slices.Contains(ns.GetFinalizers(), kinds.NamespaceFinalizer)
}

// finalizeNamespace removes kubernetes from the finalizers of the
// terminating namespace o, through its finalize subresource, as Kubernetes'
// namespace controller does once the namespace is empty; the one write also
// takes it out of metadata.finalizers, where earlier Setpoint versions put
// it. Left with no finalizer, the namespace is deleted by the write.
// changed says it wrote.
func (c *Collector) finalizeNamespace(ctx context.Context, o *gcObject) (changed bool, err error) {
	for attempt := 1; ; attempt++ {
		cur, err := c.svc.Get(ctx, kinds.NamespaceResource, "", o.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.GetUID() != o.obj.GetUID() || cur.GetDeletionTimestamp() == nil || !heldByKubernetes(cur) {
			return false, nil
		}
		notKube := func(f string) bool { return f == kinds.NamespaceFinalizer }
		spec := slices.DeleteFunc(kinds.NamespaceSpecFinalizers(cur.Object), notKube)
		if len(spec) == 0 {
			unstructured.RemoveNestedField(cur.Object, "spec", "finalizers")
		} else if err := unstructured.SetNestedStringSlice(cur.Object, spec, "spec", "finalizers"); err != nil {
			return false, err
		}
		if meta := cur.GetFinalizers(); slices.Contains(meta, kinds.NamespaceFinalizer) {
			meta = slices.DeleteFunc(slices.Clone(meta), notKube)
			if len(meta) == 0 {
				meta = nil
			}
			cur.SetFinalizers(meta)
		}
		_, err = c.svc.UpdateFinalize(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) && attempt < maxConflictRetries {
			continue
		}
		return err == nil, err
	}
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
func (c *Collector) setNamespaceConditions(ctx context.Context, o *gcObject, conds map[corev1.NamespaceConditionType]corev1.NamespaceCondition, final bool) error {
	for attempt := 1; ; attempt++ {
		cur, err := c.svc.Get(ctx, kinds.NamespaceResource, "", o.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != o.obj.GetUID() || cur.GetDeletionTimestamp() == nil {
			return nil
		}
		if final && onlyKubernetes(cur) {
			return nil
		}
		if !mergeNamespaceConditions(cur.Object, conds, metav1.NewTime(c.opts.Now())) {
			return nil
		}
		_, err = c.svc.UpdateStatus(ctx, kinds.NamespaceResource, cur, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) && attempt < maxConflictRetries {
			continue
		}
		return err
	}
}

// onlyKubernetes tells whether kubernetes is the one finalizer, in either
// list, that holds the namespace ns: once it is removed the namespace goes.
func onlyKubernetes(ns *unstructured.Unstructured) bool {
	n := 0
	for _, f := range append(kinds.NamespaceSpecFinalizers(ns.Object), ns.GetFinalizers()...) {
		if f != kinds.NamespaceFinalizer {
			return false
		}
		n++
	}
	return n > 0
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
