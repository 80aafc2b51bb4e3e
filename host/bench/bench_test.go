package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/bench/widget"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

// object1K is a Widget of about one KiB, as the engine would hand it over.
const object1K = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"widget-0001","namespace":"default","uid":"6f1c0a52-1b8e-4c1e-9d7a-3c2f9a1b0e11","resourceVersion":"123456","generation":3,"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app.kubernetes.io/name":"widget","app.kubernetes.io/part-of":"catalog","team":"platform","env":"production"},"annotations":{"setpoint.dev/owner":"platform-team@example.com","setpoint.dev/description":"A widget used by the plugin benchmark; its size is close to one KiB, like a typical small object of a control plane, with labels, annotations and a nested spec."}},"spec":{"name":"gizmo","size":"medium","color":"blue","tags":["alpha","beta","gamma","delta"],"replicas":3,"template":{"image":"registry.example.com/widgets/gizmo:1.2.3","args":["--verbose","--port=8080"],"env":[{"name":"MODE","value":"fast"},{"name":"LEVEL","value":"7"}]}},"status":{"state":"Ready","observedGeneration":3}}`

func request() *abi.ReconcileRequest {
	return &abi.ReconcileRequest{Object: abi.RawJSON(object1K), Attempt: 0, Config: map[string]string{"log": "false"}}
}

// variant is one way of making the call.
type variant struct {
	name    string
	fn      func() error
	samples []float64 // ns per call, one per round
}

// measureInterleaved runs the variants in rounds, each for a slice of
// about d/rounds per round, and returns the median ns per call of each.
// Interleaving spreads the noise of a shared machine evenly over the
// variants, so the ratios between them hold even when absolute figures
// drift.
func measureInterleaved(b *testing.B, vs []*variant, d time.Duration) {
	b.Helper()
	for _, v := range vs {
		for range 200 {
			if err := v.fn(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
	}
	const rounds = 15
	slice := d / rounds
	for range rounds {
		for _, v := range vs {
			runtime.GC()
			n := 0
			start := time.Now()
			for time.Since(start) < slice {
				for range 20 {
					if err := v.fn(); err != nil {
						b.Fatalf("%s: %v", v.name, err)
					}
				}
				n += 20
			}
			v.samples = append(v.samples, float64(time.Since(start).Nanoseconds())/float64(n))
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkPluginCalls measures one reconcile of a 1 KiB Widget through
// each path, with the same logic (host/bench/widget) everywhere, and prints
// ratios against the native baselines measured in the same run.
func BenchmarkPluginCalls(b *testing.B) {
	ctx := context.Background()
	d := 3 * time.Second
	if s := os.Getenv("SETPOINT_BENCH_TIME"); s != "" {
		if v, err := time.ParseDuration(s); err == nil {
			d = v
		}
	}
	var vs []*variant
	add := func(name string, fn func() error) { vs = append(vs, &variant{name: name, fn: fn}) }

	// Native baselines.
	req := request()
	add("native/encoding-json", func() error { _, err := reconcileJSON(req); return err })
	hs := plugin.Handlers{Reconcile: widget.Reconcile}
	var in, out []byte
	add("native/same-code-wire", func() error {
		in = req.AppendJSON(in[:0])
		var failed bool
		out, failed = hs.Dispatch(&plugintest.Host{}, abi.ExportReconcile, in, out[:0])
		var resp abi.ReconcileResponse
		if err := resp.UnmarshalJSON(out); err != nil || failed {
			return fmt.Errorf("dispatch: %v %s", err, out)
		}
		return nil
	})

	// The same logic on the SDK's typed layer (structs and encoding/json).
	hsTyped := plugin.Handlers{Reconcile: widget.TypedReconcile}
	var tin, tout []byte
	add("native/typed-wire", func() error {
		tin = req.AppendJSON(tin[:0])
		var failed bool
		tout, failed = hsTyped.Dispatch(&plugintest.Host{}, abi.ExportReconcile, tin, tout[:0])
		var resp abi.ReconcileResponse
		if err := resp.UnmarshalJSON(tout); err != nil || failed || resp.Error != "" {
			return fmt.Errorf("dispatch: %v %s", err, tout)
		}
		return nil
	})

	// Wasm guests.
	h := hosttest.NewHost(b, host.Options{})
	typedGuest := hosttest.LoadWith(b, h, "typedwidget", host.Config{Limits: host.Limits{PoolSize: 1}})
	for _, g := range []struct{ module, label string }{{"widget", "wasm-native-abi"}, {"extismwidget", "wasm-extism-abi"}} {
		for _, preempt := range []bool{true, false} {
			p := hosttest.LoadWith(b, h, g.module, host.Config{DisablePreemption: !preempt, Limits: host.Limits{PoolSize: 1}})
			if preempt && g.module == "widget" {
				b.Logf("native-ABI preemption: %s", p.Preemption())
			}
			label := g.label + "/preemption-on"
			if !preempt {
				label = g.label + "/preemption-off"
			}
			add(label, func() error {
				resp, err := p.Reconcile(ctx, req)
				if err == nil && resp.Status.String("state") == "" {
					err = fmt.Errorf("empty status")
				}
				return err
			})
		}
	}

	add("wasm-native-abi-typed/preemption-on", func() error {
		resp, err := typedGuest.Reconcile(ctx, req)
		if err == nil && resp.Status.String("state") == "" {
			err = fmt.Errorf("empty status: %+v", resp)
		}
		return err
	})

	// A localhost HTTP webhook running the same logic natively.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var rq abi.ReconcileRequest
		if err := rq.UnmarshalJSON(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := widget.Reconcile(&plugintest.Host{}, &rq)
		if err != nil {
			resp = &abi.ReconcileResponse{Error: err.Error()}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp.AppendJSON(nil))
	}))
	defer srv.Close()
	client := srv.Client()
	var body []byte
	add("http-webhook-localhost", func() error {
		body = req.AppendJSON(body[:0])
		r, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer r.Body.Close()
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		var resp abi.ReconcileResponse
		return resp.UnmarshalJSON(data)
	})

	measureInterleaved(b, vs, d)
	base, wire := median(vs[0].samples), median(vs[1].samples)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nreconcile of a 1 KiB object (%d cores, %v per variant in 15 interleaved rounds, medians):\n", runtime.NumCPU(), d)
	fmt.Fprintf(&sb, "%-36s %10s %10s %12s %12s\n", "path", "µs/call", "calls/s", "x enc/json", "x same-code")
	for _, v := range vs {
		ns := median(v.samples)
		fmt.Fprintf(&sb, "%-36s %10.1f %10.0f %12.2f %12.2f\n", v.name, ns/1000, 1e9/ns, ns/base, ns/wire)
		b.Run(v.name, func(b *testing.B) {
			b.ReportMetric(ns/1000, "µs/call")
			b.ReportMetric(1e9/ns, "calls/s")
			b.ReportMetric(ns/base, "x-encoding-json")
		})
	}
	byName := map[string]float64{}
	for _, v := range vs {
		byName[v.name] = median(v.samples)
	}
	rawW, typedW := byName["wasm-native-abi/preemption-on"], byName["wasm-native-abi-typed/preemption-on"]
	typedN := byName["native/typed-wire"]
	fmt.Fprintf(&sb, "typed layer (sdk/typed) over the raw API: +%.1f µs/call in the guest (%.2fx), +%.1f µs/call natively (%.2fx)\n",
		(typedW-rawW)/1000, typedW/rawW, (typedN-wire)/1000, typedN/wire)
	b.Log(sb.String())
	fmt.Print(sb.String())
}

// BenchmarkModuleLoad measures a cold compile, a load from the on-disk
// cache (a restart), upload-to-ready (compile, validate, first instance),
// instantiation, and the memory of a warm instance.
func BenchmarkModuleLoad(b *testing.B) {
	ctx := context.Background()
	wasm := hosttest.Module(b, "widget")
	dir := b.TempDir()
	load := func() (*host.Host, *host.Plugin, time.Duration) {
		h, err := host.New(host.Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		p, err := h.Load(ctx, "widget", wasm, host.Config{Limits: host.Limits{PoolSize: 8}})
		if err != nil {
			b.Fatal(err)
		}
		return h, p, time.Since(start)
	}
	h1, _, cold := load()
	h1.Close()
	h2, p, cached := load()
	defer h2.Close()

	// Instantiation: seven more instances of the loaded version.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := p.Prewarm(ctx, 8); err != nil {
		b.Fatal(err)
	}
	inst := time.Since(start) / 7
	// Warm them: one call each, concurrently, so every instance has run.
	req := request()
	done := make(chan error, 8)
	for range 8 {
		go func() { _, err := p.Reconcile(ctx, req); done <- err }()
	}
	for range 8 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := p.Stats()
	linear := float64(st.IdleMemoryBytes) / float64(st.IdleInstances) / (1 << 20)
	heap := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / 7 / (1 << 20)

	b.Run("cold-compile", func(b *testing.B) { b.ReportMetric(float64(cold.Milliseconds()), "ms") })
	b.Run("load-from-disk-cache", func(b *testing.B) { b.ReportMetric(float64(cached.Milliseconds()), "ms") })
	b.Run("instantiate", func(b *testing.B) { b.ReportMetric(float64(inst.Microseconds())/1000, "ms") })
	b.Run("warm-instance-memory", func(b *testing.B) { b.ReportMetric(linear, "MiB-linear") })
	msg := fmt.Sprintf("\nmodule widget.wasm, %.1f MB:\n"+
		"  upload to ready, cold (compile + validate + first instance): %v\n"+
		"  upload to ready from the on-disk cache (restart):             %v\n"+
		"  instantiate one more instance:                                %v\n"+
		"  warm instance: %.1f MiB of linear memory (%d instances), about %.1f MiB of host heap each\n",
		float64(len(wasm))/1e6, cold.Round(time.Millisecond), cached.Round(time.Millisecond), inst.Round(10*time.Microsecond),
		linear, st.IdleInstances, heap)
	b.Log(msg)
	fmt.Print(msg)
}

// The idiomatic native reconciler: encoding/json into typed structs, as an
// in-process Go controller would do it.
type widgetObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Generation        int64             `json:"generation"`
		CreationTimestamp string            `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Name     string          `json:"name"`
		Size     string          `json:"size"`
		Color    string          `json:"color"`
		Tags     []string        `json:"tags"`
		Replicas int             `json:"replicas"`
		Template json.RawMessage `json:"template"`
	} `json:"spec"`
}

type configMap struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

type widgetStatus struct {
	State           string `json:"state"`
	Replicas        int64  `json:"replicas"`
	LastProvisioned string `json:"lastProvisioned"`
}

func reconcileJSON(req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	var w widgetObject
	if err := json.Unmarshal(req.Object, &w); err != nil {
		return nil, err
	}
	var replicas int64
	switch w.Spec.Size {
	case "small":
		replicas = 1
	case "medium":
		replicas = 3
	case "large":
		replicas = 5
	default:
		return &abi.ReconcileResponse{Error: widget.ErrInvalidSize.Error(), Terminal: true}, nil
	}
	var cm configMap
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	cm.Metadata.Name, cm.Metadata.Namespace = w.Metadata.Name+"-config", w.Metadata.Namespace
	cm.Data = map[string]string{"name": w.Spec.Name, "size": w.Spec.Size, "replicas": fmt.Sprint(replicas)}
	child, err := json.Marshal(cm)
	if err != nil {
		return nil, err
	}
	state := "Provisioning"
	if len(req.Children["ConfigMap"]) > 0 {
		state = "Ready"
	}
	status, err := json.Marshal(widgetStatus{State: state, Replicas: replicas, LastProvisioned: w.Metadata.CreationTimestamp})
	if err != nil {
		return nil, err
	}
	return &abi.ReconcileResponse{Status: status, Children: []abi.RawJSON{child}}, nil
}
