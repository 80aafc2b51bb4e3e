package gc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// A background delete collects the owner's dependents without listing
// anything: its work does not depend on the other objects in the store.
func TestGCDeleteListsNothing(t *testing.T) {
	ctx := context.Background()
	s, c, st := newGCService(t, true)
	for i := range 200 {
		mustCreate(t, s, widget(fmt.Sprintf("other-%d", i), "small", nil))
	}
	owner := mustCreate(t, s, widget("owner", "small", nil))
	for i := range 5 {
		mustCreate(t, s, ownedWidget(fmt.Sprintf("dep-%d", i), false, owner))
	}
	gcSynced(t, c)
	before := st.lists.Load()
	if err := s.Delete(ctx, widgets, "default", "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		testsupport.Eventually(t, 10*time.Second, "dependent collected", widgetGone(s, fmt.Sprintf("dep-%d", i)))
	}
	if n := st.lists.Load() - before; n != 0 {
		t.Errorf("collecting 5 dependents made %d store Lists, want 0", n)
	}
	l, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil || len(l.Items) != 200 {
		t.Fatalf("widgets left = %d, %v; want the 200 unrelated ones", len(l.Items), err)
	}
}

// A owns B owns C: deleting A collects B, whose delete collects C.
func TestGCChainCascades(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)
	a := mustCreate(t, s, widget("a", "small", nil))
	b := mustCreate(t, s, ownedWidget("b", false, a))
	mustCreate(t, s, ownedWidget("c", false, b))
	keep := mustCreate(t, s, widget("keep", "small", nil))
	mustCreate(t, s, ownedWidget("d", false, b, keep)) // another owner remains
	if err := s.Delete(ctx, widgets, "default", "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "b collected", widgetGone(s, "b"))
	testsupport.Eventually(t, 10*time.Second, "c collected", widgetGone(s, "c"))
	testsupport.Eventually(t, 10*time.Second, "d's reference to b dropped", func() bool {
		d, err := s.Get(ctx, widgets, "default", "d", metav1.GetOptions{})
		return err == nil && len(d.GetOwnerReferences()) == 1 && d.GetOwnerReferences()[0].UID == keep.GetUID()
	})
}

// Foreground deletion of a chain: the owner waits until its blocking
// dependents, and theirs, are gone.
func TestGCForegroundChain(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)
	a := mustCreate(t, s, widget("fa", "small", nil))
	b := mustCreate(t, s, ownedWidget("fb", true, a))
	c := ownedWidget("fc", true, b)
	c.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, c)
	fg := metav1.DeletePropagationForeground
	if err := s.Delete(ctx, widgets, "default", "fa", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "fc terminating", func() bool {
		x, err := s.Get(ctx, widgets, "default", "fc", metav1.GetOptions{})
		return err == nil && x.GetDeletionTimestamp() != nil
	})
	for _, n := range []string{"fa", "fb"} {
		if widgetGone(s, n)() {
			t.Fatalf("%s went before its blocking dependent", n)
		}
	}
	if _, err := s.Patch(ctx, widgets, "default", "fc", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "fb deleted", widgetGone(s, "fb"))
	testsupport.Eventually(t, 10*time.Second, "fa deleted", widgetGone(s, "fa"))
}

// The watch expires (the collector fell behind and its revision was
// compacted meanwhile): the collector lists again and collects what it
// missed.
func TestGCRelistsAfterWatchExpiry(t *testing.T) {
	ctx := context.Background()
	s, c, st := newGCService(t, true)
	owner := mustCreate(t, s, widget("owner", "small", nil))
	mustCreate(t, s, ownedWidget("dep", false, owner))
	gcSynced(t, c)
	if n := c.relists.Load(); n != 1 {
		t.Fatalf("relists = %d before the cut, want 1", n)
	}
	release := st.cutWatches()
	if err := s.Delete(ctx, widgets, "default", "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "dep")() {
		t.Fatal("dep collected while the collector's watch was held")
	}
	release()
	testsupport.Eventually(t, 10*time.Second, "dep collected after the relist", widgetGone(s, "dep"))
	if n := c.relists.Load(); n != 2 {
		t.Errorf("relists = %d, want 2", n)
	}
}

// An owner the graph does not know yet (created while the graph catches up)
// is looked up in the store: its dependent is kept. Once the owner is gone
// from the store, the dependent is collected.
func TestGCUnknownOwnerIsLookedUp(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false) // no collector running: the graph is built by hand
	owner := mustCreate(t, s, widget("new-owner", "small", nil))
	dep := mustCreate(t, s, ownedWidget("new-dep", false, owner))
	c.mu.Lock()
	m := engine.StoredMeta{UID: dep.GetUID(), Name: dep.GetName(), Namespace: "default", OwnerReferences: dep.GetOwnerReferences()}
	c.g.put(c.g.node(widgets.GroupResource(), &m))
	c.g.put(c.g.node(kinds.NamespaceResource.GroupResource(), &engine.StoredMeta{UID: "ns-uid", Name: "default"}))
	c.mu.Unlock()
	if err := c.attempt(ctx, dep.GetUID()); err != nil {
		t.Fatal(err)
	}
	if widgetGone(s, "new-dep")() {
		t.Fatal("a dependent of an owner missing from the graph but present in the store was collected")
	}
	if err := s.Delete(ctx, widgets, "default", "new-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.attempt(ctx, dep.GetUID()); err != nil {
		t.Fatal(err)
	}
	if !widgetGone(s, "new-dep")() {
		t.Fatal("the dependent of a deleted owner was kept")
	}
}

// A deleted namespace stays Terminating until its content is gone, and goes
// then, without a sweep.
func TestGCNamespaceEmptied(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newGCService(t, true)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "gcns"}}}
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w := widget(fmt.Sprintf("w%d", i), "small", nil)
		w.SetNamespace("gcns")
		if i == 0 {
			w.SetFinalizers([]string{"example.setpoint.dev/hold"})
		}
		if _, err := s.Create(ctx, widgets, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "gcns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "w1 and w2 deleted, w0 terminating", func() bool {
		l, err := s.List(ctx, widgets, "gcns", metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].GetDeletionTimestamp() != nil
	})
	if n, err := s.Get(ctx, kinds.NamespaceResource, "", "gcns", metav1.GetOptions{}); err != nil || n.GetDeletionTimestamp() == nil {
		t.Fatalf("namespace with content left = %v, %v; want it Terminating", n, err)
	}
	if _, err := s.Patch(ctx, widgets, "gcns", "w0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "namespace gone", func() bool {
		_, err := s.Get(ctx, kinds.NamespaceResource, "", "gcns", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// Deleting a CRD deletes its objects and then the CRD, without a sweep.
func TestGCCRDCleanup(t *testing.T) {
	ctx := context.Background()
	s, _, st := newGCService(t, true)
	for i := range 5 {
		mustCreate(t, s, widget(fmt.Sprintf("c%d", i), "small", nil))
	}
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "CRD gone", func() bool {
		_, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	res, err := st.List(ctx, store.ResourcePrefix(widgets.Group, widgets.Resource, ""), store.ListOptions{})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("widgets left in the store: %d, %v", len(res.Items), err)
	}
}

// Two servers on one store, each running its collector, race on the same
// cascades; both settle with everything collected.
func TestGCTwoServers(t *testing.T) {
	ctx := context.Background()
	s, _, st := newGCService(t, true)
	other, err := engine.New(ctx, engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, other, newCollector(t, other, st))
	var owners []*unstructured.Unstructured
	for i := range 10 {
		o := mustCreate(t, s, widget(fmt.Sprintf("o%d", i), "small", nil))
		owners = append(owners, o)
		for j := range 3 {
			mustCreate(t, other, ownedWidget(fmt.Sprintf("o%d-d%d", i, j), false, o))
		}
	}
	for i, o := range owners {
		srv := s
		if i%2 == 1 {
			srv = other
		}
		if err := srv.Delete(ctx, widgets, "default", o.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Eventually(t, 10*time.Second, "every dependent collected", func() bool {
		l, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, it := range l.Items {
			if strings.HasPrefix(it.GetName(), "o") {
				return false
			}
		}
		return true
	})
}

// A Collector run again after its first Run ended collects as before: the
// graph is listed again and the queue is new.
func TestGCRunAgain(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false)
	first, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(first) })
	wg.Go(func() { _ = c.Run(first) })
	gcSynced(t, c)
	cancel()
	wg.Wait()
	runService(t, s, c)
	owner := mustCreate(t, s, widget("again-owner", "small", nil))
	mustCreate(t, s, ownedWidget("again-dep", false, owner))
	gcSynced(t, c)
	if err := s.Delete(ctx, widgets, "default", "again-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "again-dep collected", widgetGone(s, "again-dep"))
	if n := c.relists.Load(); n != 2 {
		t.Errorf("relists = %d, want 2", n)
	}
}
