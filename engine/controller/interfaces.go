package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Reader is the read side of the object service a controller uses. Errors are
// Kubernetes API status errors (k8s.io/apimachinery/pkg/api/errors).
type Reader interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error)
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Writer is the write side of the object service a controller uses.
type Writer interface {
	Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error)
	Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error)
	UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
}

// Client is everything a controller asks of the object service; the engine's
// Service implements it.
type Client interface {
	Reader
	Writer
}

// Reconciler computes the desired state of one object; the plugin host
// implements it for a loaded plugin.
type Reconciler interface {
	Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error)

// Reconcile implements Reconciler.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return f(ctx, req)
}

// Finalizer cleans up after an object that is being deleted; a plugin that
// exports finalize implements it.
type Finalizer interface {
	Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error)
}

// FinalizerFunc adapts a function to Finalizer.
type FinalizerFunc func(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error)

// Finalize implements Finalizer.
func (f FinalizerFunc) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return f(ctx, req)
}

// Elector decides whether this replica runs controllers: all of them
// (ManagerOptions.Elector), or one (ManagerOptions.Electors).
type Elector interface {
	// Lead blocks until this replica leads, and returns a context that is
	// done when leadership is lost or ctx is done. It returns an error when
	// ctx is done before this replica leads. An elector that holds a lease
	// releases it once ctx is done, so the caller ends ctx only after the
	// work it leads has stopped.
	Lead(ctx context.Context) (context.Context, error)
}

// SingleReplica is the Elector of a server that runs alone: it always leads.
type SingleReplica struct{}

var _ Elector = SingleReplica{}

// Lead implements Elector.
func (SingleReplica) Lead(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ctx, nil
}
