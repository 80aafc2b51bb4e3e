package engine

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// WriteAuditor records the writes the server makes in process, as a
// system identity, in the audit log the API's requests go to (the serving
// package's Auditor implements it). In Kubernetes the same work (the
// garbage collector, the controllers) is done by kube-controller-manager
// through the API, and is audited there under its own identity; here it
// calls the Service directly, so the Service records it.
type WriteAuditor interface {
	// AuditWrite records that the write attrs describe is being made,
	// with body the object or options it sends (nil for none), and returns
	// the function that records how it ended.
	AuditWrite(ctx context.Context, attrs authorizer.Attributes, body runtime.Object) func(out runtime.Object, err error)
}

// SystemGroup is the group of the server's own in-process identities
// (system:setpoint:apiserver, garbage-collector, plugin-manager,
// leader-election, rbac), so that an audit policy can name them all at
// once. A plugin's user is in PluginGroup of package plugins instead.
const SystemGroup = "system:setpoint:system"

// SystemUser returns the in-process identity name: a user in SystemGroup
// and system:authenticated.
func SystemUser(name string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: []string{SystemGroup, user.AllAuthenticated}}
}

// APIServerUser is the identity of the Service's own writes: the default
// namespace, and the CustomResourceDefinitions of the server's kinds
// (EnsureCRD), as kube-apiserver's bootstrap writes are system:apiserver's.
var APIServerUser = SystemUser("system:setpoint:apiserver")

// systemKey holds, in a context, the system identity whose writes the
// Service audits (WithSystemUser).
type systemKey struct{}

// WithSystemUser returns ctx acting as u, one of the server's own
// identities (SystemUser): the writes made with it are audited as u by
// Options.Auditor. Admission still sees them as the server's (no user),
// which RBAC's escalation checks let through: the server's own components
// hold no roles. A write whose context has a user (request.WithUser: an
// API request, a plugin's host call made on the way) is that user's, and
// is audited by whoever set it, not here.
func WithSystemUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, systemKey{}, u)
}

// auditUser returns the system identity ctx writes as when the write is to
// be audited here: nil when there is no auditor, or ctx has no system
// identity (an API request, audited by the API). With no auditor it costs
// one comparison; with one, a context lookup for the writes that are not
// the server's own.
func (s *Service) auditUser(ctx context.Context) user.Info {
	if s.opts.Auditor == nil {
		return nil
	}
	sys, ok := ctx.Value(systemKey{}).(user.Info)
	if !ok {
		return nil
	}
	if _, ok := request.UserFrom(ctx); ok {
		return nil
	}
	return sys
}

// noAudit is the end of a write that is not audited.
func noAudit(runtime.Object, error) {}

// audit starts the audit of a write made as u (auditUser) and returns the
// function that records how it ended.
func (s *Service) audit(ctx context.Context, u user.Info, verb string, gvr schema.GroupVersionResource, namespace, name, sub string, body runtime.Object) func(runtime.Object, error) {
	return s.opts.Auditor.AuditWrite(ctx, &authorizer.AttributesRecord{
		User: u, Verb: verb, ResourceRequest: true,
		APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource, Subresource: sub,
		Namespace: namespace, Name: name,
	}, body)
}

// auditObject keeps a nil *Unstructured from becoming a non-nil
// runtime.Object.
func auditObject(u *unstructured.Unstructured) runtime.Object {
	if u == nil {
		return nil
	}
	return u
}

// namespaceOf is obj's namespace; "" for no object.
func namespaceOf(obj *unstructured.Unstructured) string {
	if obj == nil || obj.Object == nil {
		return ""
	}
	return obj.GetNamespace()
}

// nameOf is obj's name; "" for no object.
func nameOf(obj *unstructured.Unstructured) string {
	if obj == nil || obj.Object == nil {
		return ""
	}
	return obj.GetName()
}

// deleteOptionsObject is opts as a delete's request object, as
// kube-apiserver records it.
func deleteOptionsObject(opts metav1.DeleteOptions) runtime.Object {
	opts.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}
	return &opts
}

// patchBody is a patch as a write's request object: its JSON.
func patchBody(data []byte) runtime.Object {
	return &runtime.Unknown{Raw: data, ContentType: runtime.ContentTypeJSON}
}
