package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// BenchmarkEgress measures an HTTP GET of a small body from a loopback
// server: natively with net/http (the baseline), and from a native-ABI
// guest through the http host function under a grant (the egress guest of
// the host tests). A guest call is a reconcile that makes the request once
// or ten times; the marginal cost of one egress call is the difference
// over nine, so that the reconcile around it does not count. Ratios are
// against the native request measured in the same run.
func BenchmarkEgress(b *testing.B) {
	ctx := context.Background()
	d := 3 * time.Second
	if s := os.Getenv("SETPOINT_BENCH_TIME"); s != "" {
		if v, err := time.ParseDuration(s); err == nil {
			d = v
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"rec-1","value":"10.0.0.1"}`)
	}))
	defer srv.Close()
	url := srv.URL + "/records/1"

	var vs []*variant
	add := func(name string, fn func() error) { vs = append(vs, &variant{name: name, fn: fn}) }

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	add("native/net-http", func() error {
		r, err := client.Get(url)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		_, err = io.ReadAll(r.Body)
		return err
	})

	h := hosttest.NewHost(b, host.Options{})
	rule, err := host.ParseEgressURL(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	rule.Methods = []string{"GET"}
	p := hosttest.LoadWith(b, h, "egress", host.Config{Egress: &host.Egress{Allow: []host.EgressRule{rule}}, Limits: host.Limits{PoolSize: 1}})
	reconcile := func(times string) func() error {
		req := &abi.ReconcileRequest{Object: abi.RawJSON(`{"apiVersion":"v1","kind":"Record","metadata":{"name":"r1"}}`),
			Config: map[string]string{"url": url, "times": times}}
		return func() error {
			resp, err := p.Reconcile(ctx, req)
			if err != nil {
				return err
			}
			var st struct{ Status int }
			if err := json.Unmarshal(resp.Status, &st); err != nil || st.Status != 200 {
				return fmt.Errorf("status %s", resp.Status)
			}
			return nil
		}
	}
	add("wasm-native-abi/reconcile+1-egress", reconcile("1"))
	add("wasm-native-abi/reconcile+10-egress", reconcile("10"))

	measureInterleaved(b, vs, d)
	native, one, ten := median(vs[0].samples), median(vs[1].samples), median(vs[2].samples)
	egress := (ten - one) / 9
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nHTTP GET of a 34-byte body from a loopback server (%d cores, %v per variant in 15 interleaved rounds, medians):\n", runtime.NumCPU(), d)
	fmt.Fprintf(&sb, "%-40s %10s %10s %10s\n", "path", "µs/call", "calls/s", "x native")
	for _, v := range vs {
		ns := median(v.samples)
		fmt.Fprintf(&sb, "%-40s %10.1f %10.0f %10.2f\n", v.name, ns/1000, 1e9/ns, ns/native)
	}
	fmt.Fprintf(&sb, "%-40s %10.1f %10.0f %10.2f\n", "egress call from the guest (marginal)", egress/1000, 1e9/egress, egress/native)
	b.Run("egress-marginal", func(b *testing.B) {
		b.ReportMetric(egress/1000, "µs/call")
		b.ReportMetric(egress/native, "x-native")
	})
	b.Log(sb.String())
	fmt.Print(sb.String())
}
