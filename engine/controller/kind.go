package controller

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is a kind a controller watches: the resource it is served as, for the
// Client, and its kind, to recognise its objects.
type Kind struct {
	Resource   schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// GroupVersionKind returns the kind's GVK.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	return k.Resource.GroupVersion().WithKind(k.Kind)
}

// ChildrenKey is the key of the kind's objects in abi.ReconcileRequest.Children:
// "Kind.group", or "Kind" for the core group.
func (k Kind) ChildrenKey() string {
	if k.Resource.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Resource.Group
}

// Key names one object of a controller's kind; Namespace is empty for a
// cluster-scoped kind.
type Key struct {
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
