package test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var (
	widgetsGVR = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func newWidget(ns, name, size string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"name": name, "size": size},
	}}
	u.SetLabels(labels)
	return u
}

// clientGoSetup starts a server with the Widget CRD and a namespace ns, and
// returns a dynamic client for it.
func clientGoSetup(t *testing.T, ns string) (*testserver.Server, dynamic.Interface) {
	t.Helper()
	s := testserver.Start(t, testserver.Options{})
	cfg := s.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../examples/widget/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := dc.Resource(nsGVR).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, dc
}

// TestClientGo drives the built server with client-go's dynamic client and
// a shared informer.
func TestClientGo(t *testing.T) {
	const ns = "clientgo"
	s, dc := clientGoSetup(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	widgets := dc.Resource(widgetsGVR).Namespace(ns)

	t.Run("create and stale update", func(t *testing.T) {
		w, err := widgets.Create(ctx, newWidget(ns, "first", "small", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.GetUID() == "" || w.GetResourceVersion() == "" || w.GetGeneration() != 1 {
			t.Fatalf("created %v", w.Object["metadata"])
		}
		fresh := w.DeepCopy()
		_ = unstructured.SetNestedField(fresh.Object, "large", "spec", "size")
		if _, err := widgets.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(w.Object, "medium", "spec", "size")
		if _, err := widgets.Update(ctx, w, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("update with a stale resourceVersion = %v, want Conflict", err)
		}
	})

	t.Run("1000 objects in pages at one revision", func(t *testing.T) {
		const n, page = 1000, 100
		createAll(ctx, t, widgets, ns, "page", n)
		// Another goroutine writes while the pages are read: from the
		// first page on, since the list is of the objects at the first
		// page's revision, and a delete before it would shrink that.
		stop := make(chan struct{})
		firstPage := make(chan struct{})
		var writes atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-firstPage:
			case <-stop:
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := widgets.Create(ctx, newWidget(ns, fmt.Sprintf("late-%04d", i), "small", nil), metav1.CreateOptions{}); err == nil {
					writes.Add(1)
				}
				_ = widgets.Delete(ctx, fmt.Sprintf("page-%04d", i), metav1.DeleteOptions{})
			}
		}()
		seen := map[string]bool{}
		rv, cont := "", ""
		for pages := 0; ; pages++ {
			l, err := widgets.List(ctx, metav1.ListOptions{Limit: page, Continue: cont, LabelSelector: "set=page"})
			if err != nil {
				t.Fatal(err)
			}
			if rv == "" {
				rv = l.GetResourceVersion()
				close(firstPage)
			} else if l.GetResourceVersion() != rv {
				t.Fatalf("page %d at resourceVersion %s, the first at %s", pages, l.GetResourceVersion(), rv)
			}
			if len(l.Items) > page {
				t.Fatalf("page of %d items, limit %d", len(l.Items), page)
			}
			for _, it := range l.Items {
				if seen[it.GetName()] {
					t.Fatalf("%s listed twice", it.GetName())
				}
				seen[it.GetName()] = true
			}
			cont = l.GetContinue()
			if cont == "" {
				break
			}
			// Let the writer commit something between every two pages.
			before := writes.Load()
			for deadline := time.Now().Add(10 * time.Second); writes.Load() == before && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		close(stop)
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("paged list saw %d objects, want %d", len(seen), n)
		}
		if writes.Load() == 0 {
			t.Fatal("the writer wrote nothing during the list")
		}
	})

	t.Run("metadata client", func(t *testing.T) {
		mc, err := metadata.NewForConfig(s.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		l, err := mc.Resource(widgetsGVR).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 || l.Items[0].Name == "" || l.Items[0].UID == "" {
			t.Fatalf("metadata list = %+v", l.Items)
		}
		m, err := mc.Resource(widgetsGVR).Namespace(ns).Get(ctx, "first", metav1.GetOptions{})
		if err != nil || m.Name != "first" || m.ResourceVersion == "" {
			t.Fatalf("metadata get = %+v, %v", m, err)
		}
	})

	t.Run("shared informer", func(t *testing.T) {
		createAll(ctx, t, widgets, ns, "inf", 20)
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = "set=inf"
		})
		inf := factory.ForResource(widgetsGVR).Informer()
		var mu sync.Mutex
		updated, deleted := map[string]bool{}, map[string]bool{}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				mu.Lock()
				defer mu.Unlock()
				updated[obj.(*unstructured.Unstructured).GetName()] = true
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				mu.Lock()
				defer mu.Unlock()
				deleted[obj.(*unstructured.Unstructured).GetName()] = true
			},
		}); err != nil {
			t.Fatal(err)
		}
		stopCh := make(chan struct{})
		defer func() { close(stopCh); factory.Shutdown() }()
		factory.Start(stopCh)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		if got := len(inf.GetStore().List()); got != 20 {
			t.Fatalf("informer holds %d objects after sync, want 20", got)
		}
		if _, err := widgets.Patch(ctx, "inf-0003", "application/merge-patch+json", []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := widgets.Delete(ctx, "inf-0007", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testsupport.Poll(t, 30*time.Second, "the informer to see the update of inf-0003 and the delete of inf-0007", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return updated["inf-0003"] && deleted["inf-0007"], fmt.Sprintf("updates %v and deletes %v", updated, deleted)
		})
		if got := len(inf.GetStore().List()); got != 19 {
			t.Errorf("informer holds %d objects, want 19", got)
		}
	})
}

// createAll creates n widgets named prefix-NNNN labelled set=prefix, with a
// few concurrent writers.
func createAll(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface, ns, prefix string, n int) {
	t.Helper()
	const workers = 8
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				obj := newWidget(ns, fmt.Sprintf("%s-%04d", prefix, i), "small", map[string]string{"set": prefix})
				if _, err := widgets.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
