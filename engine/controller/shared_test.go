package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeReader lists nothing and hands out one watch the test drives.
type fakeReader struct{ w *watch.FakeWatcher }

func (f *fakeReader) Get(context.Context, schema.GroupVersionResource, string, string, metav1.GetOptions) (*unstructured.Unstructured, error) {
	return nil, fmt.Errorf("not implemented")
}

func (f *fakeReader) List(context.Context, schema.GroupVersionResource, string, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{}
	l.SetResourceVersion("1")
	return l, nil
}

func (f *fakeReader) Watch(ctx context.Context, _ schema.GroupVersionResource, _ string, _ metav1.ListOptions) (watch.Interface, error) {
	return f.w, nil
}

// mirror is a handler's view of an informer, built from replay and changes.
type mirror struct {
	mu   sync.Mutex
	objs map[Key]string // resourceVersion
}

func (m *mirror) handle(old, cur *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur == nil {
		delete(m.objs, Key{old.GetNamespace(), old.GetName()})
		return
	}
	m.objs[Key{cur.GetNamespace(), cur.GetName()}] = cur.GetResourceVersion()
}

// Handlers registered at any moment while changes stream in end with the
// informer's contents: the replay and the changes after it leave no gap.
func TestInformerRegisterWhileChanging(t *testing.T) {
	fr := &fakeReader{w: watch.NewFake()}
	s := newSharedInformers(slog.New(slog.DiscardHandler))
	kind := Kind{Resource: schema.GroupVersionResource{Version: "v1", Resource: "things"}, Kind: "Thing"}
	si := s.acquire(context.Background(), kind, fr, "")
	<-si.synced

	const handlers, events = 16, 2000
	mirrors := make([]*mirror, handlers)
	gates := make(map[int][]chan struct{}) // by the event they open before
	var wg sync.WaitGroup
	for h := range mirrors {
		mirrors[h] = &mirror{objs: make(map[Key]string)}
		gate := make(chan struct{})
		at := rand.IntN(events)
		gates[at] = append(gates[at], gate)
		wg.Go(func() {
			<-gate
			unregister := si.register(mirrors[h].handle)
			t.Cleanup(unregister)
		})
	}
	// last sees the last change, after which every handler has seen it.
	last := make(chan struct{})
	lastRV := strconv.Itoa(events + 1)
	unregister := si.register(func(_, cur *unstructured.Unstructured) {
		if cur != nil && cur.GetResourceVersion() == lastRV {
			close(last)
		}
	})
	defer unregister()
	for n := range events {
		for _, g := range gates[n] {
			close(g)
		}
		u := &unstructured.Unstructured{}
		u.SetNamespace("default")
		u.SetName(fmt.Sprintf("o%d", rand.IntN(50)))
		u.SetResourceVersion(strconv.Itoa(n + 2))
		switch {
		case n == events-1:
			u.SetName("final")
			fr.w.Add(u)
		case rand.IntN(4) == 0:
			fr.w.Delete(u)
		default:
			fr.w.Modify(u)
		}
	}
	wg.Wait()
	<-last
	si.hmu.Lock() // the last change has reached every handler
	si.hmu.Unlock()

	want := make(map[Key]string)
	for _, k := range si.keys() {
		o, _ := si.get(k)
		want[k] = o.GetResourceVersion()
	}
	for h, m := range mirrors {
		m.mu.Lock()
		if len(m.objs) != len(want) {
			t.Errorf("handler %d: %d objects, want %d", h, len(m.objs), len(want))
		}
		for k, rv := range want {
			if m.objs[k] != rv {
				t.Errorf("handler %d: %v at %q, want %q", h, k, m.objs[k], rv)
			}
		}
		m.mu.Unlock()
	}
	s.release(si)
	select {
	case <-si.done:
	default:
		t.Error("informer still running after its last release")
	}
}
