// Package upload measures what a plugin author waits for (`make
// bench-upload`): the time from sending a module to the built server until
// its Plugin is Ready, end to end over HTTPS.
//
// Each round starts a fresh server (an empty data directory, so an empty
// compilation cache), registers the Widget kinds and then times
//
//   - cold: POST the module (bin/wasm/widget-plugin.wasm, about 3 MB) to the
//     modules endpoint, which compiles and checks it before it answers, then
//     create the Plugin that runs it, until the Plugin's Ready condition is
//     True;
//   - from the on-disk cache: restart the server on the same data directory,
//     delete the Plugin, and time the same upload and create again: the
//     module is stored already, so the upload answers at once, and the
//     Plugin's module loads from the compilation cache on disk.
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
		var cold, coldUpload, cached, cachedUpload []time.Duration
		for r := range n {
			s := testserver.Start(b, testserver.Options{LogLevel: "warn"})
			registerKinds(b, s)
			before := benchtest.LoadAvg()
			t, u := uploadToReady(b, s, wasm)
			cold, coldUpload = append(cold, t), append(coldUpload, u)

			s.Restart()
			if c := clients[s]; c != nil {
				c.CloseIdleConnections() // they went to the process that stopped
			}
			deletePlugin(b, s)
			t2, u2 := uploadToReady(b, s, wasm)
			cached, cachedUpload = append(cached, t2), append(cachedUpload, u2)
			b.Logf("round %d: cold %v (upload %v), from the on-disk cache %v (upload %v); load average %s, after %s",
				r+1, t.Round(time.Millisecond), u.Round(time.Millisecond), t2.Round(time.Millisecond), u2.Round(time.Millisecond), before, benchtest.LoadAvg())
			if err := s.Stop(); err != nil {
				b.Fatal(err)
			}
			if c := clients[s]; c != nil {
				c.CloseIdleConnections()
				delete(clients, s)
			}
		}
		report := func(what string, d, up []time.Duration, goal time.Duration) {
			slices.Sort(d)
			slices.Sort(up)
			med := d[len(d)/2]
			b.Logf("%s upload to Ready (%.1f MB module, %d rounds): median %v (min %v, max %v), of which the upload %v; goal %v: %s",
				what, float64(len(wasm))/1e6, len(d), med.Round(time.Millisecond), d[0].Round(time.Millisecond),
				d[len(d)-1].Round(time.Millisecond), up[len(up)/2].Round(time.Millisecond), goal, map[bool]string{true: "met", false: "NOT met"}[med < goal])
			b.ReportMetric(float64(med.Microseconds())/1000, what+"-ms")
		}
		report("cold", cold, coldUpload, 1500*time.Millisecond)
		report("cached", cached, cachedUpload, 100*time.Millisecond)
	}
}
