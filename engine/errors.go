package engine

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/store"
)

// storeError maps a store error to the Kubernetes status error a client
// expects for the object gr/name.
func storeError(err error, gr schema.GroupResource, name string) error {
	var st apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case errors.As(err, &st):
		return err
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrAlreadyExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(conflictMessage))
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired("too old resource version: the requested revision has been compacted")
	case errors.Is(err, store.ErrInvalidContinue):
		return apierrors.NewBadRequest("invalid continue token")
	case errors.Is(err, store.ErrFutureRevision):
		return apierrors.NewTimeoutError("Too large resource version", 1)
	case errors.Is(err, store.ErrWatcherTooSlow):
		return apierrors.NewResourceExpired("watch fell behind; resume from the last resourceVersion received")
	case errors.Is(err, store.ErrNoSpace):
		return noSpace()
	case errors.Is(err, store.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(err.Error())
	case errors.Is(err, store.ErrWriteTimedOut):
		// As kube-apiserver answers a request past its timeout; the
		// outcome of this write is unknown, so the message says so.
		return apierrors.NewTimeoutError("request did not complete within the allotted timeout: the write waits for the server's disk and may still be committed; get the object before retrying", 0)
	case errors.Is(err, store.ErrUnavailable):
		return apierrors.NewServiceUnavailable("the server's store is unavailable; try again later")
	case errors.Is(err, store.ErrCorrupt):
		return apierrors.NewInternalError(errors.New("the server's store found damaged data and refuses to serve part of it; the server log names the file"))
	}
	return apierrors.NewInternalError(fmt.Errorf("%s %q: %w", gr.String(), name, err))
}

// noSpace is 507 Insufficient Storage: the store refuses writes while its
// disk is nearly full; reads and watches go on.
func noSpace() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInsufficientStorage,
		Reason:  "InsufficientStorage",
		Message: "the server's disk is nearly full: writes are refused until space is freed (reads and watches go on)",
	}}
}

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// notServed is the error for a resource the registry does not know.
func notServed(gvr schema.GroupVersionResource) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    404,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (%s)", gvr.String()),
		Details: &metav1.StatusDetails{Group: gvr.Group, Kind: gvr.Resource},
	}}
}
