package gc

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// unreadableStore fails reads under one prefix once armed, as a store does
// for values encrypted with a key the server lacks.
type unreadableStore struct {
	*gcTestStore
	prefix string
	armed  atomic.Bool
}

var errUnreadable = errors.New("the stored value cannot be decrypted")

func (st *unreadableStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	if st.armed.Load() && strings.HasPrefix(prefix, st.prefix) {
		return nil, errUnreadable
	}
	return st.gcTestStore.List(ctx, prefix, opts)
}

func (st *unreadableStore) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	if st.armed.Load() && strings.HasPrefix(key, st.prefix) {
		return nil, errUnreadable
	}
	return st.gcTestStore.Get(ctx, key, opts)
}

// TestUnreadableResourceSkipped: a resource the store cannot read stops
// neither the collector's relist nor collection elsewhere, and a dependent of
// an owner in it is not taken for an orphan, nor a namespace holding its
// objects for empty.
func TestUnreadableResourceSkipped(t *testing.T) {
	s, _, base := newGCService(t, false)
	st := &unreadableStore{gcTestStore: base, prefix: store.ResourcePrefix("", kinds.ConfigMapResource.Resource, "")}
	ctx := context.Background()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "default"}, "data": map[string]any{"a": "b"}}}
	cm, err := s.Create(ctx, kinds.ConfigMapResource, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, ownedWidget("child-of-settings", false, cm))
	gone := widget("gone", "small", nil)
	gone.SetUID("no-such-owner")
	mustCreate(t, s, ownedWidget("orphan", false, gone))
	if _, err := s.Create(ctx, kinds.NamespaceResource, namespaceObj("team"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inTeam := cm.DeepCopy()
	inTeam.SetNamespace("team")
	inTeam.SetResourceVersion("")
	inTeam.SetUID("")
	if _, err := s.Create(ctx, kinds.ConfigMapResource, inTeam, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.armed.Store(true)

	c := newCollector(t, s, st)
	runService(t, s, c)
	testsupport.Eventually(t, 10*time.Second, "the orphan collected", widgetGone(s, "orphan"))
	settle(t, c)
	if _, err := s.Get(ctx, widgets, "default", "child-of-settings", metav1.GetOptions{}); err != nil {
		t.Fatalf("the dependent of an unreadable owner: %v", err)
	}
	if _, err := s.Get(ctx, kinds.NamespaceResource, "", "team", metav1.GetOptions{}); err != nil {
		t.Fatalf("a terminating namespace holding objects the store cannot read: %v", err)
	}
	if c.relists.Load() == 0 {
		t.Fatal("the collector never finished a relist")
	}
}
