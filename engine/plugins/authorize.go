package plugins

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// Every object a plugin reads or writes (its host calls, and what its
// reconcile controller lists, watches and writes: children, status,
// finalizers, events) is decided by the server's authorizer, as the
// plugin's user (PluginUser), with the attributes a client's request of
// the same access would have. The spec's permissions are where the
// plugin's ClusterRole comes from (see ensureRole), and the host still
// refuses, first, a host call the spec does not name: the spec is what
// the installer was checked against, so RBAC can narrow what a plugin
// does but never widen it past its spec.

// authorize asks a whether plugin may make the access attrs describes
// (as PluginUser(plugin) unless attrs names the user), and returns nil when it may, or a Forbidden
// status error that names the access, the plugin's ClusterRole and why.
// A nil a allows everything (a server without an authorizer).
//
// An authorizer that has not loaded its rules yet waits for them within
// ctx (the RBAC authorizer does), so a call at start is neither denied
// for want of rules nor allowed without them: it waits, or fails with
// ctx.
func authorize(ctx context.Context, a authorizer.Authorizer, plugin string, attrs authorizer.AttributesRecord) error {
	if a == nil {
		return nil
	}
	if attrs.User == nil {
		attrs.User = PluginUser(plugin)
	}
	attrs.ResourceRequest = true
	decision, reason, err := a.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return nil
	}
	why := fmt.Sprintf("plugin %q acts with the RBAC rules bound to its user: add the permission to the Plugin's spec.permissions "+
		"(its ClusterRole %s follows the spec), or grant it in that ClusterRole or another role bound to the user", plugin, RoleName(plugin))
	if reason != "" {
		why += "; " + reason
	}
	if err != nil {
		why += fmt.Sprintf("; authorization failed: %v", err)
	}
	return responsewriters.ForbiddenStatusError(attrs, why)
}

// accessOf describes verb on gvr (and subresource), in namespace, of the
// object name.
func accessOf(verb string, gvr schema.GroupVersionResource, subresource, namespace, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		Verb: verb, APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource,
		Subresource: subresource, Namespace: namespace, Name: name,
	}
}

// authorizedClient is a controller's Client whose every call is authorized
// as one plugin's user first.
type authorizedClient struct {
	controller.Client
	authz  authorizer.Authorizer
	plugin string
	user   user.Info // PluginUser(plugin), made once
}

// authorizeClient returns c with each call authorized by a as plugin; c
// when a is nil.
func authorizeClient(a authorizer.Authorizer, plugin string, c controller.Client) controller.Client {
	if a == nil {
		return c
	}
	return &authorizedClient{Client: c, authz: a, plugin: plugin, user: PluginUser(plugin)}
}

func (c *authorizedClient) check(ctx context.Context, verb string, gvr schema.GroupVersionResource, sub, ns, name string) error {
	attrs := accessOf(verb, gvr, sub, ns, name)
	attrs.User = c.user
	return authorize(ctx, c.authz, c.plugin, attrs)
}

func (c *authorizedClient) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	if err := c.check(ctx, "get", gvr, "", namespace, name); err != nil {
		return nil, err
	}
	return c.Client.Get(ctx, gvr, namespace, name, opts)
}

func (c *authorizedClient) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if err := c.check(ctx, "list", gvr, "", namespace, ""); err != nil {
		return nil, err
	}
	return c.Client.List(ctx, gvr, namespace, opts)
}

func (c *authorizedClient) Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	if err := c.check(ctx, "watch", gvr, "", namespace, ""); err != nil {
		return nil, err
	}
	return c.Client.Watch(ctx, gvr, namespace, opts)
}

func (c *authorizedClient) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	if err := c.check(ctx, "create", gvr, "", obj.GetNamespace(), ""); err != nil {
		return nil, err
	}
	return c.Client.Create(ctx, gvr, obj, opts)
}

func (c *authorizedClient) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := c.check(ctx, "update", gvr, "", obj.GetNamespace(), obj.GetName()); err != nil {
		return nil, err
	}
	return c.Client.Update(ctx, gvr, obj, opts)
}

func (c *authorizedClient) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := c.check(ctx, "update", gvr, "status", obj.GetNamespace(), obj.GetName()); err != nil {
		return nil, err
	}
	return c.Client.UpdateStatus(ctx, gvr, obj, opts)
}

func (c *authorizedClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if err := c.check(ctx, "delete", gvr, "", namespace, name); err != nil {
		return err
	}
	return c.Client.Delete(ctx, gvr, namespace, name, opts)
}
