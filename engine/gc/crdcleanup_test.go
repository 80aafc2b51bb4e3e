package gc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

func TestCRDServesAndStops(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false)
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("widgets not served after the CRD was created")
	}
	crd, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	got := map[string]string{}
	for _, c := range conds {
		m := c.(map[string]any)
		got[m["type"].(string)] = m["status"].(string)
	}
	if got["Established"] != "True" || got["NamesAccepted"] != "True" {
		t.Errorf("conditions = %v, want Established and NamesAccepted True", got)
	}
	mustCreate(t, s, widget("a", "small", nil))
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, c)
	if _, ok := s.Resource(widgets); ok {
		t.Fatal("widgets still served after the CRD was deleted")
	}
	// Registering it again serves an empty resource: the objects went with it.
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, widgets, "", metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Fatalf("list after re-registering = %v items, %v; want 0", len(l.Items), err)
	}
}

func crdConditionOf(t *testing.T, s *engine.Service, name, typ string) (status, reason string) {
	t.Helper()
	crd, err := s.Get(context.Background(), kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == typ {
			return m["status"].(string), m["reason"].(string)
		}
	}
	return "", ""
}

func TestCRDDeletionWaitsForObjectFinalizers(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newGCService(t, false)
	const name = "widgets.example.setpoint.dev"
	mustCreate(t, s, widget("plain", "small", nil))
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, held)

	if err := s.Delete(ctx, kinds.CRDResource, "", name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	crd, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD gone at once: %v", err)
	}
	if crd.GetDeletionTimestamp() == nil || !slices.Contains(crd.GetFinalizers(), apiextensionsv1.CustomResourceCleanupFinalizer) {
		t.Fatalf("deleted CRD: deletionTimestamp %v, finalizers %v; want both", crd.GetDeletionTimestamp(), crd.GetFinalizers())
	}
	if st, reason := crdConditionOf(t, s, name, "Terminating"); st != "True" || reason != "InstanceDeletionPending" {
		t.Errorf("Terminating = %s (%s), want True (InstanceDeletionPending)", st, reason)
	}
	// Terminating: served for reads, creates refused.
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("a terminating CRD's kind is no longer served")
	}
	if _, err := s.Get(ctx, widgets, "default", "plain", metav1.GetOptions{}); err != nil {
		t.Errorf("get while terminating: %v", err)
	}
	_, err = s.Create(ctx, widgets, widget("late", "small", nil), metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "terminating") {
		t.Errorf("create while terminating: %v, want MethodNotAllowed", err)
	}

	// The sweep deletes every object; the one with a finalizer waits, and
	// so does the CRD.
	settle(t, c)
	if _, err := s.Get(ctx, widgets, "default", "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("object without finalizers after the cleanup: %v, want NotFound", err)
	}
	h, err := s.Get(ctx, widgets, "default", "held", metav1.GetOptions{})
	if err != nil || h.GetDeletionTimestamp() == nil {
		t.Fatalf("object with a finalizer: %v, %v; want it deleting, still there", h, err)
	}
	if st, reason := crdConditionOf(t, s, name, "Terminating"); st != "True" || reason != "InstanceDeletionInProgress" {
		t.Errorf("Terminating = %s (%s), want True (InstanceDeletionInProgress)", st, reason)
	}
	if _, ok := s.Resource(widgets); !ok {
		t.Fatal("kind no longer served while an object waits for its finalizer")
	}

	// Removing the finalizer (an update, allowed while terminating) lets
	// the object go, and then the CRD.
	h.SetFinalizers(nil)
	if _, err := s.Update(ctx, widgets, h, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("remove the finalizer while terminating: %v", err)
	}
	settle(t, c)
	if _, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CRD after its last object went: %v, want NotFound", err)
	}
	if _, ok := s.Resource(widgets); ok {
		t.Fatal("kind still served after the CRD went")
	}
}

func TestCRDDeletionSeenByAnotherServer(t *testing.T) {
	ctx := context.Background()
	s, _, st := newGCService(t, false)
	other, err := engine.New(ctx, engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, other, newCollector(t, other, st))

	// A widget with a finalizer keeps the kind terminating until the test
	// lets it go; without one the other server's collector may finish the
	// deletion before the first create below is tried.
	held := widget("held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	if _, err := s.Create(ctx, widgets, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other server follows the CRD: it keeps serving the kind and
	// refuses creates.
	testsupport.Poll(t, 10*time.Second, "the other server to refuse creates", func() (bool, string) {
		_, err := other.Create(ctx, widgets, widget(fmt.Sprintf("w%d", time.Now().UnixNano()), "small", nil), metav1.CreateOptions{})
		return apierrors.IsMethodNotSupported(err), fmt.Sprintf("create: %v", err)
	})
	if _, ok := other.Resource(widgets); !ok {
		t.Fatal("the other server stopped serving the terminating kind")
	}
	// Its garbage collector completes the deletion once the last object
	// lets go. The collector marks the object deleting concurrently, so
	// the update is retried from fresh state on a conflict, as a client
	// would.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := s.Get(ctx, widgets, "default", "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetFinalizers(nil)
		_, err = s.Update(ctx, widgets, cur, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			t.Fatalf("remove the finalizer: %v", err)
		}
	}
	testsupport.Eventually(t, 10*time.Second, "the other server's garbage collector to remove the CRD", func() bool {
		if _, ok := other.Resource(widgets); ok {
			return false
		}
		_, err := s.Get(ctx, kinds.CRDResource, "", "widgets.example.setpoint.dev", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
