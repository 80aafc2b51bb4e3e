package rbac

import (
	"context"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Client is what the package needs of the engine's object service.
type Client interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error)
	Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error)
	Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
}

// Run follows the RBAC objects of c into the cache, and aggregates
// ClusterRoles, until ctx is done; it returns after its goroutines stopped.
// Decisions wait until the informers have loaded every object.
func (a *Authorizer) Run(ctx context.Context, c Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informers := []struct {
		gvr    schema.GroupVersionResource
		put    func(*unstructured.Unstructured)
		remove func(ns, name string)
	}{
		{kinds.ClusterRoleResource, typed(func(r *rbacv1.ClusterRole) { a.idx.putClusterRole(r); a.clusterRolesChanged() }),
			func(_, name string) { a.idx.deleteClusterRole(name); a.clusterRolesChanged() }},
		{kinds.RoleResource, typed(a.idx.putRole), a.idx.deleteRole},
		{kinds.ClusterRoleBindingResource, typed(a.idx.putClusterRoleBinding), func(_, name string) { a.idx.deleteClusterRoleBinding(name) }},
		{kinds.RoleBindingResource, typed(a.idx.putRoleBinding), a.idx.deleteRoleBinding},
	}
	var wg sync.WaitGroup
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		gvr := inf.gvr
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return c.List(ctx, gvr, "", opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return c.Watch(ctx, gvr, "", opts)
			},
		}
		put, remove := inf.put, inf.remove
		_, ctl := cache.NewInformerWithOptions(cache.InformerOptions{
			ListerWatcher: lw,
			ObjectType:    &unstructured.Unstructured{},
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { putObj(put, obj) },
				UpdateFunc: func(_, obj any) { putObj(put, obj) },
				DeleteFunc: func(obj any) {
					if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						obj = d.Obj
					}
					if u, ok := obj.(*unstructured.Unstructured); ok {
						remove(u.GetNamespace(), u.GetName())
					}
				},
			},
		})
		synced = append(synced, ctl.HasSynced)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctl.RunWithContext(ctx)
		}()
	}
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		a.syncedOnce.Do(func() { close(a.synced) })
		a.log.Info("rbac cache synced")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.runAggregation(ctx, c)
	}()
	<-ctx.Done()
	wg.Wait()
	return nil
}

func putObj(put func(*unstructured.Unstructured), obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		put(u)
	}
}

// typed adapts a handler of T to the informers' unstructured objects; an
// object that does not decode (validation keeps them out) is skipped.
func typed[T any](fn func(*T)) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			return
		}
		fn(t)
	}
}

// clusterRolesChanged wakes the aggregation loop.
func (a *Authorizer) clusterRolesChanged() {
	select {
	case a.aggregate <- struct{}{}:
	default:
	}
}
