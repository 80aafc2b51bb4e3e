package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// seenEvent is one call of an informer's event handler.
type seenEvent struct {
	typ, name, rv string
}

// requestLog records the requests a client-go client sends.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
	next http.RoundTripper
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r.Method+" "+r.URL.RequestURI())
	l.mu.Unlock()
	return l.next.RoundTrip(r)
}

// syncs returns the requests that fetch the whole collection: a list, or a
// watch that sends the initial state (sendInitialEvents).
func (l *requestLog) syncs() []string {
	var out []string
	for _, r := range l.all() {
		if !strings.Contains(r, "watch=true") || strings.Contains(r, "sendInitialEvents=true") {
			out = append(out, r)
		}
	}
	return out
}

// resumes returns the watches from a resourceVersion.
func (l *requestLog) resumes() []string {
	var out []string
	for _, r := range l.all() {
		if strings.Contains(r, "watch=true") && strings.Contains(r, "&resourceVersion=") && !strings.Contains(r, "sendInitialEvents=true") {
			out = append(out, r)
		}
	}
	return out
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// TestReplicasInformerSurvivesReplica: a client-go dynamic informer reaches
// the replicas through a loopback TCP proxy (a load balancer) in front of
// replica A. Writes go through replica C, one after another. A is killed
// with SIGKILL while they go on, and the proxy sends new connections to B:
// the informer's watch resumes on B from its resourceVersion, without a
// second list. Its handler sees every write exactly once, in the order they
// were made, and nothing else.
func TestReplicasInformerSurvivesReplica(t *testing.T) {
	const writes = 240
	e := etcdtest.Start(t, etcdtest.Options{})
	rs := testserver.StartReplicas(t, testserver.ReplicasOptions{Endpoints: []string{e.Endpoint}, Prefix: "/informer", LogLevel: "warn"})
	a, b, c := rs[0], rs[1], rs[2]
	if out, errOut, err := a.Kubectl("apply", "-f", "../examples/widget/crd.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := a.Kubectl("wait", "--for=condition=Established", "crd/widgets.example.setpoint.dev", "--timeout=30s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s%s", err, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wcfg := c.RESTConfig()
	wcfg.QPS, wcfg.Burst = 1000, 1000 // client-go's default, 5/s, would pace the writes
	wc, err := dynamic.NewForConfig(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	widgets := wc.Resource(widgetsGVR).Namespace("default")
	// The resource exists on C too before the informer starts.
	testsupport.Poll(t, 10*time.Second, "widgets served by C", func() (bool, string) {
		_, err := widgets.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})

	proxy := testserver.StartProxy(t, a.Addr)
	cfg := a.RESTConfig()
	cfg.Host = "https://" + proxy.Addr
	reqs := &requestLog{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { reqs.next = rt; return reqs }
	ic, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(ic, 0, "default", nil)
	inf := factory.ForResource(widgetsGVR).Informer()
	var mu sync.Mutex
	var seen []seenEvent
	var seenAt []time.Time
	record := func(typ string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u := obj.(*unstructured.Unstructured)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, seenEvent{typ, u.GetName(), u.GetResourceVersion()})
		seenAt = append(seenAt, time.Now())
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	seenCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	// The writes: each third updates the widget created before it.
	var made []seenEvent
	writeErr := make(chan error, 1)
	go func() {
		defer close(writeErr)
		for i := range writes {
			var u *unstructured.Unstructured
			var err error
			if i%3 == 2 {
				name := fmt.Sprintf("w-%03d", i-1)
				u, err = widgets.Patch(ctx, name, "application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"color":"c%d"}}`, i)), metav1.PatchOptions{})
				if err == nil {
					made = append(made, seenEvent{"update", name, u.GetResourceVersion()})
				}
			} else {
				name := fmt.Sprintf("w-%03d", i)
				u, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
					"metadata": map[string]any{"name": name},
					"spec":     map[string]any{"name": name, "size": "small"},
				}}, metav1.CreateOptions{})
				if err == nil {
					made = append(made, seenEvent{"add", name, u.GetResourceVersion()})
				}
			}
			if err != nil {
				writeErr <- fmt.Errorf("write %d through C: %w", i, err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	testsupport.Poll(t, 30*time.Second, "the informer sees the first writes", func() (bool, string) {
		n := seenCount()
		return n >= writes/4, fmt.Sprintf("%d events", n)
	})
	proxy.SetTarget(b.Addr) // the load balancer's next choice
	a.Kill()
	killed, atKill := time.Now(), seenCount()
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	last := made[len(made)-1]
	testsupport.Poll(t, 30*time.Second, "the informer sees the last write", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == last, fmt.Sprintf("%d events of %d writes", len(seen), len(made))
	})
	mu.Lock()
	got := append([]seenEvent(nil), seen...)
	mu.Unlock()
	// The longest wait between two events after the kill: the time the
	// watch took to resume on B, while the writes went on.
	var gap time.Duration
	prev := killed
	for _, at := range seenAt[atKill:] {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	t.Logf("%d writes through C; the informer saw %d events, %d of them after A was killed, with at most %.0fms between two", len(made), len(got), len(got)-atKill, float64(gap.Microseconds())/1000)
	if len(got) != len(made) {
		t.Errorf("the informer saw %d events, %d writes were made", len(got), len(made))
	}
	for i := range min(len(got), len(made)) {
		if got[i] != made[i] {
			t.Errorf("event %d: %+v, write %+v (the first difference)", i, got[i], made[i])
			break
		}
	}
	if s := reqs.syncs(); len(s) != 1 {
		t.Errorf("the informer fetched the whole collection %d times, want once (the watch resumes from its resourceVersion):\n%s", len(s), strings.Join(s, "\n"))
	}
	if r := reqs.resumes(); len(r) == 0 {
		t.Errorf("the informer never opened a watch from a resourceVersion after the kill: its requests:\n%s", strings.Join(reqs.all(), "\n"))
	}
}
