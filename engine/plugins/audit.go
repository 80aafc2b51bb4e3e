package plugins

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// Auditor records the writes plugins make in the server's audit log, under
// the policy that records the API's requests (the serving package's
// Auditor implements it). Plugins write inside the server, so no request
// passes the API's audit layer for them.
type Auditor interface {
	// AuditWrite records that the write attrs describe is being made, with
	// body the object or patch it sends (nil for none), and returns the
	// function that records how it ended: the object it returned, or its
	// error.
	AuditWrite(ctx context.Context, attrs authorizer.Attributes, body runtime.Object) func(out runtime.Object, err error)
}

// auditWrite starts the audit of a write as ctx's user (the plugin's, set
// where the write is made); a nil Auditor records nothing.
func auditWrite(ctx context.Context, a Auditor, verb string, gvr schema.GroupVersionResource, namespace, name, subresource string, body runtime.Object) func(*unstructured.Unstructured, error) {
	if a == nil {
		return func(*unstructured.Unstructured, error) {}
	}
	u, _ := request.UserFrom(ctx)
	done := a.AuditWrite(ctx, authorizer.AttributesRecord{
		User: u, Verb: verb, ResourceRequest: true,
		APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource, Subresource: subresource,
		Namespace: namespace, Name: name,
	}, body)
	return func(out *unstructured.Unstructured, err error) { done(objectOrNil(out), err) }
}

// objectOrNil keeps a nil *Unstructured from becoming a non-nil
// runtime.Object.
func objectOrNil(u *unstructured.Unstructured) runtime.Object {
	if u == nil {
		return nil
	}
	return u
}

// auditedClient is a controller's Client whose writes are audited as the
// user of their context: the plugin's, for a reconcile binding's
// controller (its children, status, finalizers and events).
type auditedClient struct {
	controller.Client
	audit Auditor
}

// auditClient returns c with its writes audited by a; c when a is nil.
func auditClient(a Auditor, c controller.Client) controller.Client {
	if a == nil {
		return c
	}
	return &auditedClient{Client: c, audit: a}
}

func (c *auditedClient) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	done := auditWrite(ctx, c.audit, "create", gvr, obj.GetNamespace(), "", "", obj)
	out, err := c.Client.Create(ctx, gvr, obj, opts)
	done(out, err)
	return out, err
}

func (c *auditedClient) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	done := auditWrite(ctx, c.audit, "update", gvr, obj.GetNamespace(), obj.GetName(), "", obj)
	out, err := c.Client.Update(ctx, gvr, obj, opts)
	done(out, err)
	return out, err
}

func (c *auditedClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	done := auditWrite(ctx, c.audit, "update", gvr, obj.GetNamespace(), obj.GetName(), "status", obj)
	out, err := c.Client.UpdateStatus(ctx, gvr, obj, opts)
	done(out, err)
	return out, err
}

func (c *auditedClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	done := auditWrite(ctx, c.audit, "delete", gvr, namespace, name, "", deleteOptions(opts))
	err := c.Client.Delete(ctx, gvr, namespace, name, opts)
	done(nil, err)
	return err
}

// deleteOptions is opts as a delete's request object, as kube-apiserver
// records it.
func deleteOptions(opts metav1.DeleteOptions) runtime.Object {
	opts.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}
	return &opts
}
