package controller_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/setpoint-dev/setpoint/engine/apiserver"
	"github.com/setpoint-dev/setpoint/engine/controller"
)

// The controller's informer is a hand-written version of client-go's
// informers. Over one engine on Badger, served over HTTP on loopback for
// client-go, the informer and a client-go dynamic informer follow the
// Widgets through a fixed-seed random sequence of creates, updates and
// deletes; once it settles, both caches hold what a list of the engine
// holds: the same objects at the same resourceVersions.
func TestInformerMatchesClientGo(t *testing.T) {
	s := newEngine(t)
	api, err := apiserver.New(apiserver.Options{Engine: s, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	dc, err := dynamic.NewForConfig(&rest.Config{Host: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	factory := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	theirs := factory.ForResource(widgets).Informer()
	factory.Start(ctx.Done())
	defer func() {
		cancel() // before Shutdown, which waits for the informer to stop
		factory.Shutdown()
	}()
	ours, synced := controller.RunInformer(ctx, widgetKind, s, "", quietLogger())

	// Some Widgets exist before either lists.
	rng := rand.New(rand.NewPCG(14, 2))
	names := make([]string, 12)
	for i := range names {
		names[i] = "w" + strconv.Itoa(i)
	}
	sizes := []string{"small", "medium", "large"}
	n := 0
	step := func() {
		n++
		name := names[rng.IntN(len(names))]
		cur, err := s.Get(ctx, widgets, "default", name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = s.Create(ctx, widgets, newWidget(name, sizes[rng.IntN(len(sizes))]), metav1.CreateOptions{})
		case err != nil:
		case rng.IntN(3) == 0:
			err = s.Delete(ctx, widgets, "default", name, metav1.DeleteOptions{})
		default:
			_ = unstructured.SetNestedField(cur.Object, sizes[rng.IntN(len(sizes))], "spec", "size")
			cur.SetLabels(map[string]string{"step": strconv.Itoa(n)})
			_, err = s.Update(ctx, widgets, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		step()
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), theirs.HasSynced) {
		t.Fatal("client-go informer did not sync")
	}
	select {
	case <-synced:
	case <-waitCtx.Done():
		t.Fatal("informer did not sync")
	}
	for range 300 {
		step()
		if rng.IntN(20) == 0 {
			time.Sleep(time.Millisecond)
		}
	}

	list, err := s.List(ctx, widgets, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, o := range list.Items {
		want[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	if len(want) == 0 {
		t.Fatal("no Widgets left: the sequence compares nothing")
	}
	clientGo := func() map[string]string {
		out := map[string]string{}
		for _, o := range theirs.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			out[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(ours(), want) || !maps.Equal(clientGo(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("caches did not settle on the engine's list:\n engine:    %v\n ours:      %v\n client-go: %v", want, ours(), clientGo())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d Widgets at the same resourceVersions", len(want))
}
