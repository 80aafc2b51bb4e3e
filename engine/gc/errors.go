package gc

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/store"
)

// ErrRunning is returned by Run while another Run of the Collector runs.
var ErrRunning = errors.New("gc: the collector is running already")

// errNotServedYet: an object of a kind whose CRD is stored but not yet
// served here; its attempt is retried.
var errNotServedYet = errors.New("gc: kind not served here yet")

// storeError gives a missing object as the NotFound a read through the
// Service gives, and other store errors as they are.
func storeError(err error, gr schema.GroupResource, name string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierrors.NewNotFound(gr, name)
	}
	return err
}
