package test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

