package engine

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/store"
)

// cancelAfterUpdate cancels the caller's context as soon as an update is
// committed: a controller stopped by a hot swap right then, or a client
// that hung up.
type cancelAfterUpdate struct {
	store.Store
	cancel context.CancelFunc
}

func (c *cancelAfterUpdate) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	newRev, err := c.Store.Update(ctx, key, value, rev)
	if c.cancel != nil {
		c.cancel()
	}
	return newRev, err
}

// The update that removes the last finalizer of a deleting object deletes
// it even when its caller gives up right after the update is committed.
func TestLastFinalizerRemovalDeletesDespiteCancel(t *testing.T) {
	s := newService(t) // no collector: only the write itself may delete
	st := s.store
	w := widget("w", "small", nil)
	w.SetFinalizers([]string{"example.setpoint.dev/hold"})
	mustCreate(t, s, w)
	if err := s.Delete(context.Background(), widgets, "default", "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.SetFinalizers(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.store = &cancelAfterUpdate{Store: st, cancel: cancel}
	_, err = s.Update(ctx, widgets, cur, metav1.UpdateOptions{})
	s.store = st
	if err != nil {
		t.Fatalf("update removing the last finalizer: %v", err)
	}
	if _, err := s.Get(context.Background(), widgets, "default", "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the object stayed, deleting with no finalizer, after its caller's context ended: %v", err)
	}
}
