package test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// TestClientGoNamespaceTerminatingCause: a create in a terminating
// namespace is a 403 carrying the NamespaceTerminating cause, as
// Kubernetes' NamespaceLifecycle admission sends it, so that client-go's
// apierrors.HasStatusCause finds it.
func TestClientGoNamespaceTerminatingCause(t *testing.T) {
	const ns = "terminating"
	_, dc := clientGoSetup(t, ns)
	ctx := context.Background()
	widgets := dc.Resource(widgetsGVR).Namespace(ns)
	held := newWidget(ns, "held", "small", nil)
	held.SetFinalizers([]string{"example.setpoint.dev/hold"})
	if _, err := widgets.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = widgets.Patch(context.Background(), "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if err := dc.Resource(nsGVR).Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := widgets.Create(ctx, newWidget(ns, "late", "small", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("create in a terminating namespace: %v, want 403", err)
	}
	if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		t.Fatalf("403 %v has no %s cause", err, corev1.NamespaceTerminatingCause)
	}
	cause, _ := apierrors.StatusCause(err, corev1.NamespaceTerminatingCause)
	want := metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is being terminated", Field: "metadata.namespace"}
	if cause != want {
		t.Errorf("cause = %+v, want %+v", cause, want)
	}
	if want := "widgets.example.setpoint.dev \"late\" is forbidden: unable to create new content in namespace " + ns + " because it is being terminated"; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
}

// TestClientGoNamespacesNoDeleteCollection: as in Kubernetes, discovery
// (legacy and aggregated) lists no deletecollection for namespaces, and a
// DELETE of the namespaces collection is a 405 that deletes nothing.
func TestClientGoNamespacesNoDeleteCollection(t *testing.T) {
	const ns = "keepme"
	s, dc := clientGoSetup(t, ns)
	ctx := context.Background()
	cfg := s.RESTConfig()
	for _, aggregated := range []bool{false, true} {
		client, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		client.UseLegacyDiscovery = !aggregated
		_, lists, err := client.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		var nsVerbs, widgetVerbs []string
		for _, l := range lists {
			for _, r := range l.APIResources {
				switch {
				case l.GroupVersion == "v1" && r.Name == "namespaces":
					nsVerbs = r.Verbs
				case l.GroupVersion == widgetsGVR.GroupVersion().String() && r.Name == "widgets":
					widgetVerbs = r.Verbs
				}
			}
		}
		if want := []string{"create", "delete", "get", "list", "patch", "update", "watch"}; !slices.Equal(nsVerbs, want) {
			t.Errorf("aggregated %v: namespaces verbs = %v, want %v", aggregated, nsVerbs, want)
		}
		if !slices.Contains(widgetVerbs, "deletecollection") {
			t.Errorf("aggregated %v: widgets verbs = %v, want deletecollection among them", aggregated, widgetVerbs)
		}
	}

	for _, opts := range []metav1.ListOptions{{FieldSelector: "metadata.name=" + ns}, {}} {
		err := dc.Resource(nsGVR).DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("deletecollection of namespaces (%q): %v, want 405 MethodNotAllowed", opts.FieldSelector, err)
		}
	}
	got, err := dc.Resource(nsGVR).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Errorf("namespace %s after the refused deletecollection: %v", ns, err)
	} else if got.GetDeletionTimestamp() != nil {
		t.Errorf("namespace %s is being deleted after the refused deletecollection", ns)
	}
	// Other kinds still take it.
	if err := dc.Resource(widgetsGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deletecollection of widgets: %v", err)
	}
}
