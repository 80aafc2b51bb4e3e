package engine

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// DefaultMaxObjectBytes is the default bound on the size of a stored object:
// etcd's default request limit (--max-request-bytes, 1.5 MiB), which
// Kubernetes objects live under and the etcd backend will need. The API
// takes request bodies of twice this (3 MiB, kube-apiserver's limit), for
// YAML and patches; the object they make must still fit.
const DefaultMaxObjectBytes = 1536 << 10

// maxObjectBytes is the bound in force.
func (s *Service) maxObjectBytes() int {
	return s.opts.MaxObjectBytes
}

// MaxObjectBytes returns the largest object, encoded, the service stores.
func (s *Service) MaxObjectBytes() int { return s.maxObjectBytes() }

// fitObject checks the encoded object b against the size bound before it is
// written, on every create and update (from clients, patches, apply,
// plugins' statuses and children, host calls): like kube-apiserver when
// etcd refuses a request as too large, it drops the object's managedFields
// (unless the caller set them, as an apply does: see managedFields) and
// encodes it again, and answers as kube-apiserver does when even that is too
// large. An update to an object stored with stored bytes may always keep it
// that large: an object at the limit (or stored under a larger one) can
// still be marked deleted, lose its finalizers, shrink. Deletion itself (the
// deletionTimestamp a delete sets) is not held to the limit: an object must
// always be deletable.
func (s *Service) fitObject(sv *kinds.Kind, obj *unstructured.Unstructured, b []byte, fields managedFields, stored int) ([]byte, error) {
	limit := max(s.maxObjectBytes(), stored)
	if len(b) <= limit {
		return b, nil
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	if mf, ok := md["managedFields"].([]any); ok && len(mf) > 0 && fields == trackWrite {
		obj.SetManagedFields(nil)
		nb, err := sv.Encode(obj)
		if err != nil {
			return nil, err
		}
		if len(nb) <= limit {
			return nb, nil
		}
		b = nb
	}
	return nil, objectTooLarge(len(b), limit)
}

// objectTooLarge is kube-apiserver's answer to etcd's "request is too large"
// (a 500 with etcd's message, as ErrorToAPIStatus makes of it), with a cause
// that gives the sizes.
func objectTooLarge(size, limit int) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: "etcdserver: request is too large",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type:    metav1.CauseType(field.ErrorTypeTooLong),
			Message: fmt.Sprintf("the object is %d bytes, more than the limit of %d", size, limit),
		}}},
	}}
}
