package engine

// Apply racing a delete (review finding 5).

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// deleteBeforeUpdate deletes the document just before the armed Update, as a
// concurrent DELETE landing between Apply's read and its write would.
type deleteBeforeUpdate struct {
	store.Store
	armed atomic.Bool
}

func (st *deleteBeforeUpdate) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	if st.armed.CompareAndSwap(true, false) {
		if _, _, err := st.Store.Delete(ctx, key, 0); err != nil {
			return 0, err
		}
	}
	return st.Store.Update(ctx, key, value, rev)
}

// Finding 5: apply is create-or-update; one that races a delete creates.
func TestApplyRacingDelete(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &deleteBeforeUpdate{Store: db}
	s, err := New(ctx, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "small"), applyOpts("alice", false)); err != nil {
		t.Fatal(err)
	}
	st.armed.Store(true)
	out, created, err := s.Apply(ctx, widgets, "default", "a", appliedWidget("a", "A", "large"), applyOpts("alice", false))
	if err != nil || !created {
		t.Fatalf("apply racing a delete: created=%v err=%v, want the object created", created, err)
	}
	if size, _, _ := unstructured.NestedString(out.Object, "spec", "size"); size != "large" {
		t.Errorf("created object's size = %q", size)
	}

	// With a resourceVersion precondition the object that is gone is not
	// re-created.
	cur, _ := s.Get(ctx, widgets, "default", "a", metav1.GetOptions{})
	pinned := []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","namespace":"default","resourceVersion":"` +
		cur.GetResourceVersion() + `"},"spec":{"name":"A","size":"small"}}`)
	st.armed.Store(true)
	if _, created, err := s.Apply(ctx, widgets, "default", "a", pinned, applyOpts("alice", false)); err == nil || created {
		t.Errorf("pinned apply racing a delete: created=%v err=%v, want an error", created, err)
	}
}
