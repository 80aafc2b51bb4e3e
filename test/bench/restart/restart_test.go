// Package restart measures how long a restarted server takes to serve
// again (`make bench-restart`): a server holding 100,000 objects and three
// plugins is stopped and started on its data directory, and the benchmark
// prints the time from starting the process until
//
//   - /readyz answers 200 (polled every 50 ms by the test harness);
//   - a watch resumed from a resourceVersion taken before the stop gets
//     its first event (the object created last before the stop);
//   - the admission plugins serve: a Widget created after the restart is
//     admitted by the validating plugin (labels) and patched by the mutating
//     one (defaults); writes to Widgets wait for them at start-up;
//   - the reconciling plugin serves: that Widget's status is written by the
//     widget plugin;
//
// and the latest of these, against a goal of 2 s, then the server's log of
// its last start (at info level), which says where the time went. The
// 100,000 objects are Notes, a kind of their own with no plugin, created
// over HTTPS before the stop (not timed); the plugins' modules are compiled
// (and in the on-disk cache) before the stop, as on any server that ran
// them.
//
// Run it with
//
//	make bench-restart
//	go test -run '^$' -bench . -benchtime 1x -v ./test/bench/restart
//
// OBJECTS changes the 100,000 objects, ROUNDS the 3 restarts (the median
// and the extremes are printed). PROFILE=file writes a CPU profile of the
// last restarted server's first PROFILE_SECONDS (8 by default) seconds to
// file, read from its /debug/pprof/profile from the moment it accepts
// connections; the figures of that round carry the profiler's cost.
package restart

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	notesPath   = "/apis/bench.setpoint.dev/v1/namespaces/default/notes"
	widgetsPath = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"
)

const noteCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"notes.bench.setpoint.dev"},
"spec":{"group":"bench.setpoint.dev","scope":"Namespaced","names":{"plural":"notes","singular":"note","kind":"Note","listKind":"NoteList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// client sends requests to one server process over one keep-alive client.
type client struct {
	b *testing.B
	s *testserver.Server
	c *http.Client
}

func newClient(b *testing.B, s *testserver.Server) *client {
	return &client{b: b, s: s, c: s.HTTPClient()}
}

// do sends body as JSON and fails the benchmark unless the answer is one
// of want; it returns the status code and the body.
func (c *client) do(method, path string, body []byte, want ...int) (int, []byte) {
	c.b.Helper()
	code, out, err := c.try(method, path, body)
	if err != nil {
		c.b.Fatalf("%s %s: %v", method, path, err)
	}
	if len(want) > 0 && !slices.Contains(want, code) {
		c.b.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return code, out
}

func (c *client) try(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, c.s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.s.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes(), err
}

// install uploads the module name and creates the Plugin of spec.
func (c *client) install(name, module, spec string) {
	c.b.Helper()
	wasm, err := os.ReadFile(filepath.Join(testserver.ModuleRoot(c.b), "bin", "wasm", module+".wasm"))
	if err != nil {
		c.b.Fatalf("%v (make plugins builds it)", err)
	}
	req, _ := http.NewRequest(http.MethodPost, c.s.URL+modulePath, bytes.NewReader(wasm))
	req.Header.Set("Authorization", "Bearer "+c.s.Token)
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := c.c.Do(req)
	if err != nil {
		c.b.Fatal(err)
	}
	var m struct {
		Digest string `json:"digest"`
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || !strings.HasPrefix(m.Digest, "sha256:") {
		c.b.Fatalf("upload of %s: %d %v", module, resp.StatusCode, err)
	}
	c.do(http.MethodPost, pluginsPath, fmt.Appendf(nil, `{"apiVersion":"setpoint.dev/v1alpha1","kind":"Plugin","metadata":{"name":%q},
"spec":{"module":{"digest":%q},%s}}`, name, m.Digest, spec), http.StatusCreated)
	testsupport.Poll(c.b, 2*time.Minute, "plugin "+name+" Ready", func() (bool, string) {
		_, body := c.do(http.MethodGet, pluginsPath+"/"+name, nil, http.StatusOK)
		return readyTrue(body), string(body)
	})
}

func readyTrue(body []byte) bool {
	var p struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &p) != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// fill creates n Notes with 32 writers.
func (c *client) fill(n int) {
	c.b.Helper()
	var next atomic.Int64
	var failed atomic.Pointer[string]
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || failed.Load() != nil {
					return
				}
				body := fmt.Appendf(nil, `{"apiVersion":"bench.setpoint.dev/v1","kind":"Note","metadata":{"name":"note-%06d","labels":{"set":"s%d"}},"data":{"text":"a note of a few dozen bytes, number %d"}}`, i, i%100, i)
				code, out, err := c.try(http.MethodPost, notesPath, body)
				if err != nil || code != http.StatusCreated {
					msg := fmt.Sprintf("create note %d: %d %s %v", i, code, out, err)
					failed.CompareAndSwap(nil, &msg)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := failed.Load(); m != nil {
		c.b.Fatal(*m)
	}
}

// metric reads an unlabelled sample from /metrics; 0 when absent.
func (c *client) metric(name string) float64 {
	_, body := c.do(http.MethodGet, "/metrics", nil, http.StatusOK)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// resourceVersion is the list resourceVersion of path.
func (c *client) resourceVersion(path string) string {
	_, body := c.do(http.MethodGet, path+"?limit=1", nil, http.StatusOK)
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &l); err != nil || l.Metadata.ResourceVersion == "" {
		c.b.Fatalf("list %s: %s %v", path, body, err)
	}
	return l.Metadata.ResourceVersion
}

// firstWatchEvent watches path from rv and returns the name of the first
// object it reports.
func (c *client) firstWatchEvent(path, rv string) string {
	c.b.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.s.URL+path+"?watch=1&resourceVersion="+rv, nil)
	req.Header.Set("Authorization", "Bearer "+c.s.Token)
	resp, err := c.c.Do(req)
	if err != nil {
		c.b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.b.Fatalf("watch from %s: %d", rv, resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		c.b.Fatalf("watch from %s: %v", rv, err)
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		c.b.Fatalf("watch event %s: %v", line, err)
	}
	return ev.Type + " " + ev.Object.Metadata.Name
}

// profileStart asks the server s, which is starting, for a CPU profile of
// its next seconds and writes it to file; the returned channel gives the
// outcome. The request waits in the listen queue until the server serves.
func profileStart(s *testserver.Server, file string, seconds int) <-chan error {
	done := make(chan error, 1)
	go func() {
		c := s.HTTPClient()
		c.Timeout = time.Duration(seconds)*time.Second + time.Minute
		deadline := time.Now().Add(time.Minute)
		for {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.URL, seconds), nil)
			req.Header.Set("Authorization", "Bearer "+s.Token)
			resp, err := c.Do(req)
			if err != nil {
				if time.Now().After(deadline) {
					done <- fmt.Errorf("profile: %w", err)
					return
				}
				time.Sleep(5 * time.Millisecond) // not listening yet
				continue
			}
			var out bytes.Buffer
			_, err = out.ReadFrom(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("profile: %d %s", resp.StatusCode, out.Bytes())
			}
			if err == nil {
				err = os.WriteFile(file, out.Bytes(), 0o644)
			}
			done <- err
			return
		}
	}()
	return done
}

// goal is the time a restarted server has to serve everything in.
const goal = 2 * time.Second

// ofGoal is d and its ratio to the goal.
func ofGoal(d time.Duration) string {
	return fmt.Sprintf("%v (%.2fx of the %v goal)", d.Round(time.Millisecond), d.Seconds()/goal.Seconds(), goal)
}

func BenchmarkRestart(b *testing.B) {
	for range b.N {
		objects := benchtest.MustEnv(b, "OBJECTS", 100000)
		rounds := benchtest.MustEnv(b, "ROUNDS", 3)
		profile, profileSeconds := os.Getenv("PROFILE"), benchtest.MustEnv(b, "PROFILE_SECONDS", 8)
		s := testserver.Start(b, testserver.Options{LogLevel: "info"})
		c := newClient(b, s)
		c.do(http.MethodPost, crdPath, []byte(noteCRD), http.StatusCreated)
		for _, f := range []string{"crd.yaml", "provision-crd.yaml"} {
			if out, errOut, err := s.Kubectl("apply", "-f", filepath.Join(testserver.ModuleRoot(b), "examples", "widget", f)); err != nil {
				b.Fatalf("kubectl apply %s: %v\n%s%s", f, err, out, errOut)
			}
		}
		for _, p := range []string{notesPath, widgetsPath} {
			testsupport.Poll(b, 30*time.Second, p+" served", func() (bool, string) {
				code, _, err := c.try(http.MethodGet, p, nil)
				return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v", code, err)
			})
		}
		c.install("widget", "widget-plugin", `"reconcile":{"for":"widgets.example.setpoint.dev","owns":["widgetprovisions.example.setpoint.dev"]}`)
		c.install("labels", "requiredlabels", `"config":{"labels":"team"},"admission":[{"resources":["widgets.example.setpoint.dev"],"operations":["CREATE","UPDATE"],"type":"Validating"}]`)
		c.install("defaults", "defaults", `"config":{"labels.env":"bench"},"admission":[{"resources":["widgets.example.setpoint.dev"],"operations":["CREATE","UPDATE"],"type":"Mutating"}]`)
		fillStart := time.Now()
		c.fill(objects)
		b.Logf("%d Notes created in %v (%.0f/s); load average %s", objects, time.Since(fillStart).Round(time.Millisecond),
			float64(objects)/time.Since(fillStart).Seconds(), benchtest.LoadAvg())
		// The modules are compiled, as on a server that has run them, so
		// that the restart loads them from the on-disk cache.
		testsupport.Poll(b, 2*time.Minute, "the plugins' background compiles", func() (bool, string) {
			in, sw := c.metric("setpoint_plugin_interpreted_loads_total"), c.metric("setpoint_plugin_tier_switches_total")
			return sw >= in, fmt.Sprintf("%v loads on the interpreter, %v switched", in, sw)
		})

		var ready, watch, admitted, reconciled, served []time.Duration
		var lastStart time.Time
		for r := range rounds {
			rv := c.resourceVersion(notesPath)
			last := fmt.Sprintf("last-%d", r)
			c.do(http.MethodPost, notesPath, fmt.Appendf(nil, `{"apiVersion":"bench.setpoint.dev/v1","kind":"Note","metadata":{"name":%q}}`, last), http.StatusCreated)
			if err := s.Stop(); err != nil {
				b.Fatal(err)
			}
			c.c.CloseIdleConnections()
			before := benchtest.LoadAvg()
			var profiled <-chan error
			if profile != "" && r == rounds-1 {
				profiled = profileStart(s, profile, profileSeconds)
			}

			start := time.Now()
			lastStart = start
			s.Restart() // its stop finds the server stopped; it returns once /readyz answers 200
			tReady := time.Since(start)
			c = newClient(b, s)
			if got := c.firstWatchEvent(notesPath, rv); got != "ADDED "+last {
				b.Fatalf("the resumed watch's first event is %q, want ADDED %s", got, last)
			}
			tWatch := time.Since(start)
			widget := fmt.Sprintf("probe-%d", r)
			c.do(http.MethodPost, widgetsPath, fmt.Appendf(nil, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"labels":{"team":"a"}},"spec":{"name":"Probe","size":"small"}}`, widget), http.StatusCreated)
			tAdmitted := time.Since(start)
			_, body := c.do(http.MethodGet, widgetsPath+"/"+widget, nil, http.StatusOK)
			if !bytes.Contains(body, []byte(`"env":"bench"`)) {
				b.Fatalf("the Widget created after the restart lacks the defaults plugin's label: %s", body)
			}
			var tReconciled time.Duration
			for deadline := start.Add(time.Minute); ; {
				_, body := c.do(http.MethodGet, widgetsPath+"/"+widget, nil, http.StatusOK)
				if bytes.Contains(body, []byte(`"state":`)) {
					tReconciled = time.Since(start)
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("the Widget created after the restart has no status a minute later: %s", body)
				}
				time.Sleep(2 * time.Millisecond)
			}
			all := max(tReady, tWatch, tAdmitted, tReconciled)
			ready, watch, admitted, reconciled, served = append(ready, tReady), append(watch, tWatch), append(admitted, tAdmitted), append(reconciled, tReconciled), append(served, all)
			b.Logf("restart %d: ready %v, resumed watch's first event %v, admitted by both admission plugins %v, reconciled %v; load average %s, after %s",
				r+1, tReady.Round(time.Millisecond), tWatch.Round(time.Millisecond), tAdmitted.Round(time.Millisecond), tReconciled.Round(time.Millisecond),
				before, benchtest.LoadAvg())
			if profiled != nil {
				if err := <-profiled; err != nil {
					b.Fatal(err)
				}
				b.Logf("CPU profile of the first %d s of restart %d: %s", profileSeconds, r+1, profile)
			}
		}
		med := func(d []time.Duration) string {
			d = slices.Clone(d)
			slices.Sort(d)
			return fmt.Sprintf("median %s, min %v, max %v", ofGoal(d[len(d)/2]), d[0].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
		}
		b.Logf("restart of a server with %d objects and 3 plugins, %d rounds, time from the start of the process:", objects+rounds, rounds)
		for _, p := range []struct {
			name string
			d    []time.Duration
		}{
			{"/readyz answers 200", ready},
			{"resumed watch's first event", watch},
			{"admission plugins serve", admitted},
			{"reconcile plugin serves", reconciled},
		} {
			b.Logf("  %-28s %s", p.name, med(p.d))
		}
		slices.Sort(served)
		m := served[len(served)/2]
		b.Logf("ready, all served and watches resumable: %s; goal: %s", med(served), map[bool]string{true: "met", false: "NOT met"}[m < goal])
		b.ReportMetric(float64(m.Microseconds())/1000, "served-ms")
		// Where the last start's time went, by the server's own log.
		logs := s.Logs()
		var startLog strings.Builder
		for line := range strings.Lines(logs[strings.LastIndex(logs, "=== setpoint"):]) {
			if strings.Contains(line, "time=") && !strings.Contains(line, "msg=request") {
				startLog.WriteString(line)
			}
		}
		b.Logf("the last start's log (process started at %s):\n%s", lastStart.UTC().Format("15:04:05.000"), startLog.String())
		if err := s.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}
