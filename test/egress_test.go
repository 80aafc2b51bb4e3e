package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// probeCRD is the kind the egress guest reconciles: its status is what the
// guest's HTTP call gave (host/testdata/guests/egress/calls).
var probeCRD = testsupport.CRD{Kind: "Probe", Status: true}.String()

// TestEgress installs a Plugin through the API whose module calls a
// loopback server over HTTP: a method the grant lacks is refused with an
// error that names the grant, a changed grant takes effect on the running
// plugin without a restart, a malformed grant is refused at update naming
// its entry, and the calls show in the metrics and the plugin's log.
func TestEgress(t *testing.T) {
	var got atomic.Int64
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	}))
	defer ext.Close()
	wasm, err := os.ReadFile(wasmModule(t, "egress"))
	if err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{})
	if out, errOut, err := s.KubectlInput(probeCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	digest := mustUpload(t, s, wasm)
	plugin := func(methods string) string {
		return pluginManifest("egress", digest, fmt.Sprintf(`  reconcile: {for: probes.example.setpoint.dev}
  config: {url: %q, method: PUT, body: record-1}
  limits: {callTimeout: 5s}
  egress:
    allow:
    - {url: %q, methods: [%s]}
    timeout: 2s
`, ext.URL+"/records/1", ext.URL, methods))
	}
	applyPlugin(t, s, plugin("GET"))
	waitPlugin(t, s, "egress", time.Minute, loadedWith(digest))
	if out, errOut, err := s.KubectlInput("apiVersion: example.setpoint.dev/v1\nkind: Probe\nmetadata: {name: p1, namespace: default}\nspec: {n: 1}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("apply probe: %v\n%s%s", err, out, errOut)
	}
	probe := func() string {
		out, _, _ := s.Kubectl("get", "probe", "p1", "-o", "jsonpath={.status}")
		return out
	}
	want := "egress to " + ext.URL + " (PUT) is not granted: add it to spec.egress.allow of Plugin egress"
	testsupport.Poll(t, 30*time.Second, "the probe's status names the missing grant", func() (bool, string) {
		st := probe()
		return strings.Contains(st, want) && strings.Contains(st, `"forbidden":true`), st
	})
	if n := got.Load(); n != 0 {
		t.Fatalf("the server got %d requests the grant does not allow", n)
	}

	// A malformed grant is refused, naming the entry; the plugin keeps
	// serving with the grant it has.
	bad := strings.Replace(plugin("GET, PUT"), "- {url: "+fmt.Sprintf("%q", ext.URL), "- {url: \"ftp://files.example.com\"", 1)
	if out, errOut, err := s.KubectlInput(bad, "apply", "-f", "-"); err == nil || !strings.Contains(errOut, "spec.egress.allow[0].url") {
		t.Errorf("applying a grant for ftp:// = %v\n%s%s; want a refusal naming spec.egress.allow[0].url", err, out, errOut)
	}

	// Granting PUT takes effect on the running plugin; the next reconcile
	// (the spec change of the probe) gets through.
	applyPlugin(t, s, plugin("GET, PUT"))
	testsupport.Poll(t, 30*time.Second, "the probe's PUT gets through", func() (bool, string) {
		if _, _, err := s.Kubectl("annotate", "--overwrite", "probe", "p1", fmt.Sprintf("try=%d", time.Now().UnixNano())); err != nil {
			return false, err.Error()
		}
		st := probe()
		var doc struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		_ = json.Unmarshal([]byte(st), &doc)
		return doc.Status == 200 && doc.Body == "PUT record-1", st
	})

	_, metrics, err := s.Do("GET", "/metrics", s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{
		fmt.Sprintf(`setpoint_plugin_egress_requests_total{host=%q,plugin="egress",status="200"}`, ext.URL),
		`setpoint_plugin_egress_requests_total{host="none",plugin="egress",status="forbidden"}`,
		`setpoint_plugin_egress_request_duration_seconds_count{host=` + fmt.Sprintf("%q", ext.URL) + `,plugin="egress"}`,
	} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	code, logs, err := s.Do("GET", pluginsPath+"/egress/log", s.Token, nil)
	if err != nil || code != 200 {
		t.Fatalf("plugin log: %d %v", code, err)
	}
	host := strings.TrimPrefix(ext.URL, "http://")
	for _, line := range []string{"egress PUT " + host + ": 200", "egress PUT " + host + ": forbidden"} {
		if !strings.Contains(string(logs), line) {
			t.Errorf("the plugin's log lacks %q:\n%s", line, logs)
		}
	}
	if strings.Contains(string(logs), "record-1") {
		t.Errorf("the plugin's log shows a request body:\n%s", logs)
	}
}
