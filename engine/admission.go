package engine

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Operation is the kind of write admission sees.
type Operation string

// The operations.
const (
	OpCreate Operation = "CREATE"
	OpUpdate Operation = "UPDATE"
	OpDelete Operation = "DELETE"
)

// AdmissionRequest describes one write to the admission chain.
type AdmissionRequest struct {
	Operation   Operation
	Resource    schema.GroupVersionResource
	Kind        schema.GroupVersionKind
	Subresource string
	Namespace   string
	Name        string
	// Object is the object being written (nil on delete). Mutate may change
	// it in place.
	Object *unstructured.Unstructured
	// OldObject is the stored object on update and delete.
	OldObject *unstructured.Unstructured
	DryRun    bool
	// User is the authenticated user of the request, when there is one.
	User user.Info
}

// Admitter is the admission seam. The engine calls it on every write in
// Kubernetes' order: Mutate, then the kind's schema validation, then Validate.
// An error denies the write; a *errors.StatusError reaches the client as is,
// any other error becomes 403 Forbidden.
type Admitter interface {
	Mutate(ctx context.Context, req *AdmissionRequest) error
	Validate(ctx context.Context, req *AdmissionRequest) error
}

// A NotifyingAdmitter is an Admitter that says when its Mutate may change
// the object. MutateNotify does what Mutate does and calls changing before
// the first change it may make to req.Object (before it runs a mutating
// plugin, say), perhaps more than once, and never when it leaves
// req.Object as it was. The engine checks mutating admission's changes
// against a copy of the object, taken when changing is first called: a
// write that no mutating plugin admits costs no copy and no comparison.
type NotifyingAdmitter interface {
	Admitter
	MutateNotify(ctx context.Context, req *AdmissionRequest, changing func()) error
}

// MutateNotify runs a's mutating admission, calling changing before any
// change it may make: at once when a cannot say (not a NotifyingAdmitter).
func MutateNotify(ctx context.Context, a Admitter, req *AdmissionRequest, changing func()) error {
	if n, ok := a.(NotifyingAdmitter); ok {
		return n.MutateNotify(ctx, req, changing)
	}
	changing()
	return a.Mutate(ctx, req)
}

func (s *Service) admitter() Admitter {
	if b := s.adm.Load(); b != nil {
		return b.a
	}
	return nil
}

func newAdmissionRequest(ctx context.Context, op Operation, sv *kinds.Kind, sub string, obj, old *unstructured.Unstructured, dry bool) *AdmissionRequest {
	req := &AdmissionRequest{
		Operation: op, Resource: sv.GVR, Kind: sv.GVK(), Subresource: sub,
		Object: obj, OldObject: old, DryRun: dry,
	}
	src := obj
	if src == nil {
		src = old
	}
	if src != nil {
		req.Namespace, req.Name = src.GetNamespace(), src.GetName()
	}
	if u, ok := request.UserFrom(ctx); ok {
		req.User = u
	}
	return req
}

// mutate runs a's mutating admission (see MutateNotify).
func mutate(ctx context.Context, a Admitter, req *AdmissionRequest, changing func()) error {
	return admissionError(req, MutateNotify(ctx, a, req, changing))
}

func (s *Service) validateAdmission(ctx context.Context, req *AdmissionRequest) error {
	a := s.admitter()
	if a == nil {
		return nil
	}
	return admissionError(req, a.Validate(ctx, req))
}

func admissionError(req *AdmissionRequest, err error) error {
	if err == nil {
		return nil
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, err)
}

// AdmitterFuncs adapts two functions to an Admitter; a nil function admits
// everything.
type AdmitterFuncs struct {
	MutateFunc   func(ctx context.Context, req *AdmissionRequest) error
	ValidateFunc func(ctx context.Context, req *AdmissionRequest) error
}

var _ NotifyingAdmitter = AdmitterFuncs{}

// MutateNotify calls changing and MutateFunc, when there is one.
func (f AdmitterFuncs) MutateNotify(ctx context.Context, req *AdmissionRequest, changing func()) error {
	if f.MutateFunc == nil {
		return nil
	}
	changing()
	return f.MutateFunc(ctx, req)
}

// Mutate calls MutateFunc.
func (f AdmitterFuncs) Mutate(ctx context.Context, req *AdmissionRequest) error {
	return f.MutateNotify(ctx, req, func() {})
}

// Validate calls ValidateFunc.
func (f AdmitterFuncs) Validate(ctx context.Context, req *AdmissionRequest) error {
	if f.ValidateFunc == nil {
		return nil
	}
	return f.ValidateFunc(ctx, req)
}

// systemFields are the metadata fields the server owns: mutating admission
// may not set or change them. As in Kubernetes, where the registry fills
// them after admission (rest.BeforeCreate, rest.BeforeUpdate), the server's
// values are put back after the mutating chain, whatever it returned: a
// plugin cannot give an object another object's uid, backdate it, mark it
// deleted, or move its resourceVersion or generation.
var systemFields = [...]string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "generation", "selfLink"}

// systemMeta is a snapshot of an object's systemFields (nil for an absent
// field).
type systemMeta [len(systemFields)]any

func systemMetaOf(obj *unstructured.Unstructured) systemMeta {
	var m systemMeta
	if md, ok := obj.Object["metadata"].(map[string]any); ok {
		for i, k := range systemFields {
			m[i] = md[k]
		}
	}
	return m
}

// restore puts the snapshot back into obj's metadata. The values are
// scalars (strings and numbers), shared safely with the snapshot's source.
func (m systemMeta) restore(obj *unstructured.Unstructured) {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj.Object["metadata"] = md
	}
	for i, k := range systemFields {
		if m[i] == nil {
			delete(md, k)
		} else {
			md[k] = m[i]
		}
	}
}
