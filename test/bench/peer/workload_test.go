package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

const (
	namespace   = "default"
	widgetsPath = "/apis/example.setpoint.dev/v1/namespaces/" + namespace + "/widgets"
	padKey      = "bench.setpoint.dev/pad"
	sentKey     = "bench.setpoint.dev/sent"
	objectSize  = 1024
	pageLimit   = 500
	listRepeats = 3
)

var (
	widgetGVR = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// widgetCRD is the kind both servers serve: a schema with a required field,
// an enum, a default and a CEL rule, and the status subresource, so that
// every write is validated and defaulted as a real CRD's would be.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.setpoint.dev
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [name, size]
            x-kubernetes-validations:
            - rule: "self.name.size() <= 63"
              message: "name must be at most 63 characters"
            properties:
              name: {type: string, minLength: 1}
              size: {type: string, enum: [small, medium, large]}
              color: {type: string, default: gray}
          status:
            type: object
            properties:
              state: {type: string}
`

func objectName(i int) string { return fmt.Sprintf("w%07d", i) }

// widget is a Widget padded with an annotation to about size bytes of JSON.
// The padding is hex digits of a hash of the name, which no store can
// compress much more than real annotations.
func widget(name string, size int) *unstructured.Unstructured {
	pad := max(size-len(name)*2-160, 0)
	var hexPad strings.Builder
	for sum := sha256.Sum256([]byte(name)); hexPad.Len() < pad; sum = sha256.Sum256(sum[:]) {
		hexPad.WriteString(hex.EncodeToString(sum[:]))
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name":        name,
			"annotations": map[string]any{padKey: hexPad.String()[:pad]},
		},
		"spec": map[string]any{"name": name, "size": "medium", "color": "blue"},
	}}
}

// workload drives one server with client-go: creates, GETs and patches
// through the dynamic client, as generic controllers make them; LISTs and
// watches as raw bytes through client-go's REST client and transport, so
// that the client (which shares the machine) does not decode thousands of
// objects per figure.
type workload struct {
	b       *testing.B
	s       *server
	widgets dynamic.ResourceInterface
	dyn     dynamic.Interface
	rest    rest.Interface
	http    *http.Client // client-go's transport: TLS, the token, HTTP/2
	host    string
	timeout time.Duration
}

func newWorkload(b *testing.B, s *server, timeout time.Duration) *workload {
	b.Helper()
	cfg := rest.CopyConfig(s.cfg)
	// No client-side rate limit, and no gzip: on loopback compression only
	// spends both sides' CPU (kube-apiserver would gzip large LISTs).
	cfg.QPS, cfg.Burst = -1, 0
	cfg.DisableCompression = true
	cfg.UserAgent = "setpoint-bench-peer"
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	return &workload{
		b: b, s: s, dyn: dyn, rest: cs.CoreV1().RESTClient(), http: hc, host: cfg.Host, timeout: timeout,
		widgets: dyn.Resource(widgetGVR).Namespace(namespace),
	}
}

// installCRD creates the Widget CRD and waits until Widgets are served; it
// returns how long that took.
func (w *workload) installCRD() time.Duration {
	w.b.Helper()
	j, err := yaml.YAMLToJSON([]byte(widgetCRD))
	if err != nil {
		w.b.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := crd.UnmarshalJSON(j); err != nil {
		w.b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := w.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		w.b.Fatalf("%s: create CRD: %v", w.s.name, err)
	}
	for {
		_, err := w.widgets.List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			w.b.Fatalf("%s: Widgets not served within a minute: %v", w.s.name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// warmUp creates and reads n Widgets in a namespace of their own, so that
// connections, caches and heaps are warm before anything is measured.
func (w *workload) warmUp(n, concurrency int) {
	w.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "warm"},
	}}
	if _, err := w.dyn.Resource(nsGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		w.b.Fatalf("%s: create namespace: %v", w.s.name, err)
	}
	warm := w.dyn.Resource(widgetGVR).Namespace("warm")
	if p := benchtest.Run(concurrency, n, w.timeout, func(ctx context.Context, i int) error {
		_, err := warm.Create(ctx, widget(objectName(i), objectSize), metav1.CreateOptions{})
		return err
	}); p.Err != nil {
		w.b.Fatalf("%s: warm-up creates: %v", w.s.name, p.Err)
	}
	if p := benchtest.Run(concurrency, n, w.timeout, func(ctx context.Context, i int) error {
		_, err := warm.Get(ctx, objectName(i), metav1.GetOptions{})
		return err
	}); p.Err != nil {
		w.b.Fatalf("%s: warm-up GETs: %v", w.s.name, p.Err)
	}
}

// measured is a phase's rate and the server's CPU per operation.
type measured struct {
	rate  float64 // operations per second
	cpuUS float64 // server CPU per operation, µs
	p99   time.Duration
}

// phase runs op n times from concurrency goroutines and measures it.
func (w *workload) phase(what string, concurrency, n int, op func(ctx context.Context, i int) error) measured {
	w.b.Helper()
	cpu0 := w.s.cpu(w.b)
	p := benchtest.Run(concurrency, n, w.timeout, op)
	cpu := w.s.cpu(w.b) - cpu0
	if p.Err != nil {
		w.b.Fatalf("%s: %s: %v", w.s.name, what, p.Err)
	}
	m := measured{rate: p.Rate(), cpuUS: cpu / float64(p.Ops) * 1e6, p99: p.Quantile(0.99)}
	w.b.Logf("%s: %s: %d in %v, %.0f/s, p50 %v p99 %v, server CPU %.0f µs each",
		w.s.name, what, p.Ops, p.Elapsed.Round(time.Millisecond), m.rate, p.Quantile(0.5), m.p99, m.cpuUS)
	return m
}

func (w *workload) creates(concurrency, n int) measured {
	return w.phase("creates", concurrency, n, func(ctx context.Context, i int) error {
		_, err := w.widgets.Create(ctx, widget(objectName(i), objectSize), metav1.CreateOptions{})
		return err
	})
}

func (w *workload) gets(concurrency, n, objects int) measured {
	return w.phase("GETs", concurrency, n, func(ctx context.Context, i int) error {
		_, err := w.widgets.Get(ctx, objectName(pick(i, objects)), metav1.GetOptions{})
		return err
	})
}

// pick spreads reads over the objects with a fixed stride.
func pick(i, objects int) int { return (i * 7919) % objects }

// raw GETs path, with the query parameters in pairs, as JSON through
// client-go's REST client.
func (w *workload) raw(ctx context.Context, path string, params ...string) ([]byte, error) {
	r := w.rest.Get().AbsPath(path).SetHeader("Accept", "application/json")
	for i := 0; i+1 < len(params); i += 2 {
		r = r.Param(params[i], params[i+1])
	}
	return r.DoRaw(ctx)
}

// list reads every Widget in one request (limit 0) or in pages of limit,
// listRepeats times, and returns the median time. It parses only what a
// paging client must while timed, and checks the count afterwards.
func (w *workload) list(limit, want int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	var times []time.Duration
	for range listRepeats {
		var bodies [][]byte
		start := time.Now()
		cont := ""
		for {
			var params []string
			if limit > 0 {
				params = append(params, "limit", strconv.Itoa(limit))
				if cont != "" {
					params = append(params, "continue", cont)
				}
			}
			body, err := w.raw(ctx, widgetsPath, params...)
			if err != nil {
				w.b.Fatalf("%s: LIST: %v", w.s.name, err)
			}
			bodies = append(bodies, body)
			if limit == 0 {
				break
			}
			if cont, err = benchtest.ListMeta(body, "continue"); err != nil {
				w.b.Fatalf("%s: LIST: %v", w.s.name, err)
			}
			if cont == "" {
				break
			}
		}
		times = append(times, time.Since(start))
		items := 0
		for _, body := range bodies {
			var l struct {
				Items []struct{} `json:"items"`
			}
			if err := json.Unmarshal(body, &l); err != nil {
				w.b.Fatalf("%s: LIST: %v", w.s.name, err)
			}
			items += len(l.Items)
		}
		if items != want {
			w.b.Fatalf("%s: LIST (limit %d) returned %d Widgets, want %d", w.s.name, limit, items, want)
		}
	}
	d := slices.Sorted(slices.Values(times))[len(times)/2]
	w.b.Logf("%s: LIST of %d (limit %d): median %v of %v", w.s.name, want, limit, d.Round(time.Microsecond), times)
	return d
}

// patchSent stamps Widget name with the time the write starts, which every
// watcher reads back to measure delivery.
func (w *workload) patchSent(ctx context.Context, name string) error {
	p := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, sentKey, time.Now().UnixNano())
	_, err := w.widgets.Patch(ctx, name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
	return err
}
