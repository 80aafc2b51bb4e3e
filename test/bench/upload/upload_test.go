// Package upload measures what a plugin author waits for (`make
// bench-upload`): the time from sending a module to the built server until
// its Plugin is Ready, end to end over HTTPS.
//
// Each round starts fresh servers (an empty data directory, so an empty
// compilation cache), registers the Widget kinds and then times
//
//   - cold: POST the module (bin/wasm/widget-plugin.wasm, about 3 MB) to the
//     modules endpoint, which loads and checks it before it answers, then
//     create the Plugin that runs it, until the Plugin's Ready condition is
//     True. It is timed twice in the same round, on two servers: with the
//     module served at once by wazero's interpreter while it compiles in
//     the background (--plugin-interpreter-first, the default), and with
//     --plugin-interpreter-first=false, which waits for the optimizing
//     compiler; the ratio is printed;
//   - from the on-disk cache: restart the tiered server on the same data
//     directory, delete the Plugin, and time the same upload and create
//     again: the module is stored already, so the upload answers at once,
//     and the Plugin's module loads compiled from the cache on disk.
//
// BenchmarkInterpreterWindow measures what the interpreter costs while it
// serves: reconciles per second of the widget plugin's module on one
// instance on the interpreter, until the background compile switches it,
// and then compiled, in the same run, and how long the window lasted.
//
// Run it with
//
//	make bench-upload
//	go test -run '^$' -bench . -benchtime 1x -v ./test/bench/upload
//
// ROUNDS changes the 5 rounds; the median and the extremes are printed. The
// machine's load average is printed with them, since compiling is CPU-bound.
package upload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

const (
	modulePath  = "/apis/setpoint.dev/v1alpha1/modules"
	pluginsPath = "/apis/setpoint.dev/v1alpha1/plugins"
	crdPath     = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
)

// clients keeps one keep-alive client per server process, so that the
// figures hold the server's time and not a TLS handshake per request.
var clients = map[*testserver.Server]*http.Client{}

func client(s *testserver.Server) *http.Client {
	c, ok := clients[s]
	if !ok {
		c = s.HTTPClient()
		clients[s] = c
	}
	return c
}

// do sends body (JSON unless contentType says otherwise) and fails b unless
// the answer is one of want.
func do(b *testing.B, s *testserver.Server, method, path, contentType string, body []byte, want ...int) []byte {
	b.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client(s).Do(req)
	if err != nil {
		b.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		b.Fatal(err)
	}
	if !slices.Contains(want, resp.StatusCode) {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out.String())
	}
	return out.Bytes()
}

// registerKinds creates the Widget and WidgetProvision kinds and waits until
// both are served.
func registerKinds(b *testing.B, s *testserver.Server) {
	b.Helper()
	for _, f := range []string{"crd.yaml", "provision-crd.yaml"} {
		stdout, stderr, err := s.Kubectl("apply", "-f", filepath.Join(testserver.ModuleRoot(b), "examples", "widget", f))
		if err != nil {
			b.Fatalf("kubectl apply %s: %v\n%s%s", f, err, stdout, stderr)
		}
	}
	for _, p := range []string{"/apis/example.setpoint.dev/v1/widgets", "/apis/example.setpoint.dev/v1/widgetprovisions"} {
		testsupport.Poll(b, 30*time.Second, p+" served", func() (bool, string) {
			code, _, err := s.Do(http.MethodGet, p, s.Token, nil)
			return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v", code, err)
		})
	}
}

// pluginManifest is the example's Plugin for the module digest.
func pluginManifest(digest string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"setpoint.dev/v1alpha1","kind":"Plugin","metadata":{"name":"widget"},
"spec":{"module":{"digest":%q},"reconcile":{"for":"widgets.example.setpoint.dev","owns":["widgetprovisions.example.setpoint.dev"]}}}`, digest)
}

// uploadToReady uploads wasm, creates the Plugin and returns how long it
// took until the Plugin was Ready, and how much of it the upload took.
func uploadToReady(b *testing.B, s *testserver.Server, wasm []byte) (total, upload time.Duration) {
	b.Helper()
	start := time.Now()
	resp := do(b, s, http.MethodPost, modulePath, "application/wasm", wasm, http.StatusOK, http.StatusCreated)
	upload = time.Since(start)
	var m struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal(resp, &m); err != nil || !strings.HasPrefix(m.Digest, "sha256:") {
		b.Fatalf("upload answered %s (%v), want the module's digest", resp, err)
	}
	do(b, s, http.MethodPost, pluginsPath, "application/json", pluginManifest(m.Digest), http.StatusCreated)
	deadline := start.Add(60 * time.Second)
	for {
		var p struct {
			Status struct {
				Conditions []struct {
					Type, Status, Reason, Message string
				} `json:"conditions"`
			} `json:"status"`
		}
		body := do(b, s, http.MethodGet, pluginsPath+"/widget", "", nil, http.StatusOK)
		if err := json.Unmarshal(body, &p); err != nil {
			b.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return time.Since(start), upload
			}
			if c.Type == "Loaded" && c.Status == "False" {
				b.Fatalf("plugin not loaded: %s: %s", c.Reason, c.Message)
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("plugin not Ready after 60 s: %s", body)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// deletePlugin deletes the Plugin and waits until it is gone.
func deletePlugin(b *testing.B, s *testserver.Server) {
	b.Helper()
	do(b, s, http.MethodDelete, pluginsPath+"/widget", "", nil, http.StatusOK, http.StatusAccepted)
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, err := s.Do(http.MethodGet, pluginsPath+"/widget", s.Token, nil)
		if err == nil && code == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("plugin still there 60 s after its deletion: %d %s %v", code, body, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkUploadToReady(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(b), "bin", "wasm", "widget-plugin.wasm"))
	if err != nil {
		b.Fatalf("%v (make plugins builds it)", err)
	}
	for range b.N {
		n := benchtest.MustEnv(b, "ROUNDS", 5)
		var cold, coldUpload, compiled, compiledUpload, cached, cachedUpload []time.Duration
		for r := range n {
			// The server that waits for the compiler first, so that the
			// tiered one's background compile does not overlap it.
			sc := testserver.Start(b, testserver.Options{LogLevel: "warn", Args: []string{"--plugin-interpreter-first=false"}})
			registerKinds(b, sc)
			tc, uc := uploadToReady(b, sc, wasm)
			compiled, compiledUpload = append(compiled, tc), append(compiledUpload, uc)
			stop(b, sc)

			s := testserver.Start(b, testserver.Options{LogLevel: "warn", Args: []string{"--plugin-interpreter-first"}})
			registerKinds(b, s)
			before := benchtest.LoadAvg()
			t, u := uploadToReady(b, s, wasm)
			cold, coldUpload = append(cold, t), append(coldUpload, u)
			// The status says which code serves it: the interpreter at
			// Ready, unless the compile was done by the status's write.
			if body := do(b, s, http.MethodGet, pluginsPath+"/widget", "", nil, http.StatusOK); !bytes.Contains(body, []byte(`"tier":"interpreter"`)) &&
				!bytes.Contains(body, []byte(`"tier":"compiled"`)) {
				b.Fatalf("the Plugin's status does not say its tier: %s", body)
			}
			// The restart below waits for nothing: let the background
			// compile finish, so that the cache holds the compiled code.
			waitSwitched(b, s)

			s.Restart()
			if c := clients[s]; c != nil {
				c.CloseIdleConnections() // they went to the process that stopped
			}
			deletePlugin(b, s)
			t2, u2 := uploadToReady(b, s, wasm)
			cached, cachedUpload = append(cached, t2), append(cachedUpload, u2)
			b.Logf("round %d: cold %v (upload %v), waiting for the compiler %v (upload %v), from the on-disk cache %v (upload %v); load average %s, after %s",
				r+1, t.Round(time.Millisecond), u.Round(time.Millisecond), tc.Round(time.Millisecond), uc.Round(time.Millisecond),
				t2.Round(time.Millisecond), u2.Round(time.Millisecond), before, benchtest.LoadAvg())
			stop(b, s)
		}
		med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
		report := func(what string, d, up []time.Duration, goal time.Duration) {
			d = slices.Clone(d)
			slices.Sort(d)
			m := d[len(d)/2]
			b.Logf("%s upload to Ready (%.1f MB module, %d rounds): median %v (min %v, max %v), of which the upload %v; goal %v: %s",
				what, float64(len(wasm))/1e6, len(d), m.Round(time.Millisecond), d[0].Round(time.Millisecond),
				d[len(d)-1].Round(time.Millisecond), med(up).Round(time.Millisecond), goal, map[bool]string{true: "met", false: "NOT met"}[m < goal])
			b.ReportMetric(float64(m.Microseconds())/1000, strings.ReplaceAll(what, " ", "-")+"-ms")
		}
		report("cold", cold, coldUpload, 300*time.Millisecond)
		report("cold compiler-first", compiled, compiledUpload, 1500*time.Millisecond)
		report("cached", cached, cachedUpload, 100*time.Millisecond)
		b.Logf("cold upload to Ready, interpreter first / compiler first: %.2fx (medians %v / %v)",
			float64(med(cold))/float64(med(compiled)), med(cold).Round(time.Millisecond), med(compiled).Round(time.Millisecond))
	}
}

// stop stops s and drops its client.
func stop(b *testing.B, s *testserver.Server) {
	b.Helper()
	if err := s.Stop(); err != nil {
		b.Fatal(err)
	}
	if c := clients[s]; c != nil {
		c.CloseIdleConnections()
		delete(clients, s)
	}
}

// waitSwitched waits until the server's plugin versions run compiled code:
// its tier-switch counter reaches its interpreted-load counter.
func waitSwitched(b *testing.B, s *testserver.Server) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body := do(b, s, http.MethodGet, "/metrics", "", nil, http.StatusOK)
		interpreted, switched := metric(body, "setpoint_plugin_interpreted_loads_total"), metric(body, "setpoint_plugin_tier_switches_total")
		if failed := metric(body, "setpoint_plugin_tier_failures_total"); failed > 0 {
			b.Fatalf("%v background compiles failed", failed)
		}
		if interpreted > 0 && switched >= interpreted {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no switch to compiled code 2 minutes after the upload (%v loads on the interpreter, %v switched)", interpreted, switched)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric reads the value of an unlabelled metric from a Prometheus text
// exposition; 0 when absent.
func metric(body []byte, name string) float64 {
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
