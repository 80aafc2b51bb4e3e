package test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// The reconcile acceptance suite (issue 6) runs the built binary with
// `--examples`, so the server itself installs the Widget and ReplicaGroup
// plugins built from examples/ (what `make run` does), and then checks, on
// one server through its life: 1,000 widgets converge (Ready, observed
// generation); a spec edit converges; a child deleted by hand comes back; a
// deleted widget runs finalize and its child is garbage-collected; a failing
// plugin backs off, visibly in the Ready condition and in /metrics; a plugin
// hot-swapped during a run leaves nothing stuck; a restart during a run
// converges with nothing lost.
//
// SETPOINT_ACCEPTANCE_WIDGETS overrides the 1,000 of the first step.

const (
	accNS            = "default"
	accWidgets       = "/apis/example.setpoint.dev/v1/namespaces/" + accNS + "/widgets"
	accProvisions    = "/apis/example.setpoint.dev/v1/namespaces/" + accNS + "/widgetprovisions"
	accGroups        = "/apis/example.setpoint.dev/v1/namespaces/" + accNS + "/replicagroups"
	accReplicas      = "/apis/example.setpoint.dev/v1/namespaces/" + accNS + "/replicas"
	accPlugins       = "/apis/setpoint.dev/v1alpha1/plugins"
	accModules       = "/apis/setpoint.dev/v1alpha1/modules"
	accPhaseLabel    = "acceptance.setpoint.dev/phase"
	accConvergeLimit = 4 * time.Minute // generous: the machine is shared and loaded
)

var accCapacity = map[string]int64{"small": 1, "medium": 4, "large": 16}

// acceptance talks to one server over one HTTP/2 client.
type acceptance struct {
	t *testing.T
	s *testserver.Server
	c *http.Client
}

func (a *acceptance) do(method, path, contentType string, body []byte) (int, []byte, error) {
	opts := testserver.DoOptions{Client: a.c, Timeout: 2 * time.Minute}
	var in io.Reader
	if body != nil {
		in = bytes.NewReader(body)
		opts.Header = http.Header{"Content-Type": {contentType}}
	}
	return a.s.DoWith(method, path, a.s.Token, in, opts)
}

// must sends a request and fails the test unless the answer is one of want.
func (a *acceptance) must(method, path, contentType string, body []byte, want ...int) []byte {
	a.t.Helper()
	code, b, err := a.do(method, path, contentType, body)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	for _, w := range want {
		if code == w {
			return b
		}
	}
	a.t.Fatalf("%s %s: %d %s", method, path, code, b)
	return nil
}

type accObject struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		Generation        int64             `json:"generation"`
		DeletionTimestamp string            `json:"deletionTimestamp"`
		Labels            map[string]string `json:"labels"`
		OwnerReferences   []struct {
			UID        string `json:"uid"`
			Controller bool   `json:"controller"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		Size     string `json:"size"`
		Capacity int64  `json:"capacity"`
		Replicas int64  `json:"replicas"`
	} `json:"spec"`
	Status struct {
		State              string `json:"state"`
		Capacity           int64  `json:"capacity"`
		Replicas           int64  `json:"replicas"`
		ObservedGeneration int64  `json:"observedGeneration"`
		LoadedDigest       string `json:"loadedDigest"`
		Preemption         string `json:"preemption"`
		Conditions         []struct {
			Type, Status, Reason, Message string
			ObservedGeneration            int64 `json:"observedGeneration"`
		} `json:"conditions"`
	} `json:"status"`
}

func (o *accObject) ready() (status, reason, message string, gen int64) {
	for _, c := range o.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status, c.Reason, c.Message, c.ObservedGeneration
		}
	}
	return "", "", "", 0
}

func (a *acceptance) list(path, selector string) []accObject {
	a.t.Helper()
	if selector != "" {
		path += "?labelSelector=" + selector
	}
	var l struct{ Items []accObject }
	if err := json.Unmarshal(a.must("GET", path, "", nil, 200), &l); err != nil {
		a.t.Fatal(err)
	}
	return l.Items
}

func (a *acceptance) get(path string) (accObject, bool) {
	a.t.Helper()
	code, b, err := a.do("GET", path, "", nil)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	var o accObject
	if code == http.StatusNotFound {
		return o, false
	}
	if code != 200 {
		a.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		a.t.Fatal(err)
	}
	return o, true
}

// eventually polls check until it returns "" (done) or the limit passes; it
// returns how long it took. It asks again after 100 ms, then half as often
// again each time up to a second: a condition that holds soon is seen
// soon, and a check that lists thousands of objects does not slow the
// convergence it waits for.
func (a *acceptance) eventually(what string, limit time.Duration, check func() string) time.Duration {
	a.t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	for wait := 100 * time.Millisecond; ; wait = min(wait*3/2, time.Second) {
		msg := check()
		if msg == "" {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s: not done after %s: %s", what, limit, msg)
		}
		time.Sleep(wait)
	}
}

// createWidgets creates the widgets named prefix-0 ... prefix-(n-1), labelled
// with phase, with 8 requests in flight, starting one every pace; created
// counts the successes when not nil.
func (a *acceptance) createWidgets(prefix, phase string, n int, pace time.Duration, created *atomic.Int64) error {
	return a.createWidgetsUntil(prefix, phase, n, pace, created, nil)
}

// createWidgetsUntil is createWidgets that starts no create once stop is
// closed.
func (a *acceptance) createWidgetsUntil(prefix, phase string, n int, pace time.Duration, created *atomic.Int64, stop <-chan struct{}) error {
	sizes := []string{"small", "medium", "large"}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"%s-%d","labels":{%q:%q}},"spec":{"name":"Widget %d","size":%q}}`,
					prefix, i, accPhaseLabel, phase, i, sizes[i%3])
				code, b, err := a.do("POST", accWidgets, "application/json", []byte(body))
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("%d %s", code, b)
				}
				if err != nil {
					errs <- fmt.Errorf("create %s-%d: %w", prefix, i, err)
				} else if created != nil {
					created.Add(1)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-stop:
			break feed
		}
		if pace > 0 {
			time.Sleep(pace)
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs // nil when there was none
}

// widgetsConverged checks every widget with the label selector (all when
// ""): Ready, observedGeneration equal to generation on the status and the
// condition, the capacity of its size, and its WidgetProvision owned by it
// with the same capacity. It returns "" or what is not converged yet.
func (a *acceptance) widgetsConverged(selector string, wantCount int) string {
	widgets := a.list(accWidgets, selector)
	children := map[string]accObject{}
	for _, c := range a.list(accProvisions, "") {
		children[c.Metadata.Name] = c
	}
	if wantCount >= 0 && len(widgets) != wantCount {
		return fmt.Sprintf("%d widgets, want %d", len(widgets), wantCount)
	}
	bad, first := 0, ""
	for _, w := range widgets {
		st, _, msg, condGen := w.ready()
		c, ok := children[w.Metadata.Name]
		want := accCapacity[w.Spec.Size]
		var why string
		switch {
		case w.Metadata.DeletionTimestamp != "":
			why = "being deleted"
		case w.Status.State != "Ready" || st != "True":
			why = fmt.Sprintf("state %q, Ready %q (%s)", w.Status.State, st, msg)
		case w.Status.ObservedGeneration != w.Metadata.Generation || condGen != w.Metadata.Generation:
			why = fmt.Sprintf("generation %d, observed %d, condition %d", w.Metadata.Generation, w.Status.ObservedGeneration, condGen)
		case w.Status.Capacity != want:
			why = fmt.Sprintf("status capacity %d, want %d", w.Status.Capacity, want)
		case !ok:
			why = "no WidgetProvision"
		case c.Spec.Capacity != want || len(c.Metadata.OwnerReferences) != 1 ||
			c.Metadata.OwnerReferences[0].UID != w.Metadata.UID || !c.Metadata.OwnerReferences[0].Controller:
			why = fmt.Sprintf("WidgetProvision capacity %d, owners %+v", c.Spec.Capacity, c.Metadata.OwnerReferences)
		}
		if why != "" {
			if bad == 0 {
				first = w.Metadata.Name + ": " + why
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Sprintf("%d of %d widgets not converged (first: %s)", bad, len(widgets), first)
	}
	return ""
}

// swap uploads wasm and points the widget Plugin at it.
func (a *acceptance) swap(wasm []byte) (string, error) {
	code, b, err := a.do("POST", accModules, "application/wasm", wasm)
	if err == nil && code != 200 && code != 201 {
		err = fmt.Errorf("upload: %d %s", code, b)
	}
	if err != nil {
		return "", err
	}
	var info struct{ Digest string }
	if err := json.Unmarshal(b, &info); err != nil {
		return "", err
	}
	code, b, err = a.do("PATCH", accPlugins+"/widget", "application/merge-patch+json", []byte(`{"spec":{"module":{"digest":"`+info.Digest+`"}}}`))
	if err == nil && code != 200 {
		err = fmt.Errorf("patch plugin: %d %s", code, b)
	}
	return info.Digest, err
}

// pluginLoaded waits until the Plugin runs digest ("" for any) and is Ready.
func (a *acceptance) pluginLoaded(name, digest string) {
	a.t.Helper()
	a.eventually("plugin "+name+" loaded", 3*time.Minute, func() string {
		p, ok := a.get(accPlugins + "/" + name)
		if !ok {
			return "no Plugin " + name
		}
		st, reason, msg, _ := p.ready()
		if st != "True" || p.Status.LoadedDigest == "" || (digest != "" && p.Status.LoadedDigest != digest) {
			return fmt.Sprintf("loaded %q, Ready %q %s %s", p.Status.LoadedDigest, st, reason, msg)
		}
		return ""
	})
}

// metric sums the samples of a series whose line contains every part.
func (a *acceptance) metric(name string, parts ...string) float64 {
	a.t.Helper()
	text := string(a.must("GET", "/metrics", "", nil, 200))
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(m[1], p)
		}
		if all {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}

func TestReconcileAcceptance(t *testing.T) {
	n := 1000
	if v := os.Getenv("SETPOINT_ACCEPTANCE_WIDGETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			t.Fatalf("SETPOINT_ACCEPTANCE_WIDGETS=%q: want a number >= 10", v)
		}
	}
	buildGuests(t)
	widgetModule, err := os.ReadFile(filepath.Join("..", "bin", "wasm", "widget-plugin.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	s := testserver.Start(t, testserver.Options{Args: []string{"--examples", "--examples-dir", filepath.Join("..", "examples")}, LogLevel: "warn"})
	a := &acceptance{t: t, s: s, c: s.HTTPClient()}
	a.c.Timeout = 2 * time.Minute
	t.Cleanup(a.c.CloseIdleConnections)
	a.pluginLoaded("widget", "")
	a.pluginLoaded("replicagroup", "")
	total := 0

	t.Run("widgets converge", func(t *testing.T) {
		a.t = t
		start := time.Now()
		if err := a.createWidgets("bulk", "bulk", n, 0, nil); err != nil {
			t.Fatal(err)
		}
		created := time.Since(start)
		took := a.eventually(fmt.Sprintf("%d widgets Ready", n), accConvergeLimit, func() string {
			return a.widgetsConverged(accPhaseLabel+"=bulk", n)
		})
		total += n
		t.Logf("%d widgets: created in %s, all Ready with observedGeneration == generation %s after (%s in all)",
			n, created.Round(time.Millisecond), (time.Since(start) - created).Round(time.Millisecond), (created + took).Round(time.Millisecond))
	})

	t.Run("spec edit converges", func(t *testing.T) {
		a.t = t
		for i := range 20 {
			a.must("PATCH", fmt.Sprintf("%s/bulk-%d", accWidgets, i), "application/merge-patch+json", []byte(`{"spec":{"size":"large"}}`), 200)
		}
		a.eventually("edited widgets converged", accConvergeLimit, func() string {
			for i := range 20 {
				w, _ := a.get(fmt.Sprintf("%s/bulk-%d", accWidgets, i))
				c, _ := a.get(fmt.Sprintf("%s/bulk-%d", accProvisions, i))
				if w.Status.Capacity != 16 || w.Status.ObservedGeneration != w.Metadata.Generation || c.Spec.Capacity != 16 {
					return fmt.Sprintf("bulk-%d: generation %d observed %d capacity %d, child %d", i, w.Metadata.Generation, w.Status.ObservedGeneration, w.Status.Capacity, c.Spec.Capacity)
				}
			}
			return ""
		})
		if msg := a.widgetsConverged(accPhaseLabel+"=bulk", n); msg != "" {
			t.Fatal(msg)
		}
	})

	t.Run("child deleted by hand is recreated", func(t *testing.T) {
		a.t = t
		old := map[string]string{}
		for i := 20; i < 30; i++ {
			name := fmt.Sprintf("bulk-%d", i)
			c, _ := a.get(accProvisions + "/" + name)
			old[name] = c.Metadata.UID
			a.must("DELETE", accProvisions+"/"+name, "", nil, 200, 202)
		}
		a.eventually("children recreated", accConvergeLimit, func() string {
			for name, uid := range old {
				c, ok := a.get(accProvisions + "/" + name)
				if !ok || c.Metadata.UID == uid {
					return name + " not recreated"
				}
			}
			return a.widgetsConverged(accPhaseLabel+"=bulk", n)
		})
	})

	t.Run("deleted widget runs finalize and its child is collected", func(t *testing.T) {
		a.t = t
		for i := 30; i < 40; i++ {
			a.must("DELETE", fmt.Sprintf("%s/bulk-%d", accWidgets, i), "", nil, 200, 202)
		}
		total -= 10
		a.eventually("widgets and children gone", accConvergeLimit, func() string {
			for i := 30; i < 40; i++ {
				if _, ok := a.get(fmt.Sprintf("%s/bulk-%d", accWidgets, i)); ok {
					return fmt.Sprintf("widget bulk-%d still there", i)
				}
				if _, ok := a.get(fmt.Sprintf("%s/bulk-%d", accProvisions, i)); ok {
					return fmt.Sprintf("WidgetProvision bulk-%d still there", i)
				}
			}
			return ""
		})
		// Events are written in the background: the last finalize's may land
		// just after its widget is gone.
		a.eventually("a Deprovisioned event for each deleted widget", 30*time.Second, func() string {
			var events struct {
				Items []struct {
					Reason, Message string
					InvolvedObject  struct{ Name string } `json:"involvedObject"`
				}
			}
			if err := json.Unmarshal(a.must("GET", "/api/v1/namespaces/"+accNS+"/events", "", nil, 200), &events); err != nil {
				t.Fatal(err)
			}
			finalized := map[string]string{}
			for _, e := range events.Items {
				if e.Reason == "Deprovisioned" {
					finalized[e.InvolvedObject.Name] = e.Message
				}
			}
			for i := 30; i < 40; i++ {
				name := fmt.Sprintf("bulk-%d", i)
				want := fmt.Sprintf("widget %s released %d capacity units", name, accCapacity[[]string{"small", "medium", "large"}[i%3]])
				if finalized[name] != want {
					return fmt.Sprintf("Deprovisioned event of %s: %q, want %q", name, finalized[name], want)
				}
			}
			return ""
		})
	})

	t.Run("failing plugin backs off, in the condition and the metrics", func(t *testing.T) {
		a.t = t
		errorsBefore := a.metric("setpoint_controller_reconcile_total", `controller="replicagroup"`, `result="error"`)
		a.must("POST", accGroups, "application/json",
			[]byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"ReplicaGroup","metadata":{"name":"too-big"},"spec":{"replicas":80}}`), 201)
		start := time.Now()
		a.eventually("Ready=False on the group", 2*time.Minute, func() string {
			g, _ := a.get(accGroups + "/too-big")
			st, reason, msg, _ := g.ready()
			if st != "False" || reason != "ReconcileFailed" || !strings.Contains(msg, "too many replicas: spec.replicas is 80, the plugin's maxReplicas is 50") {
				return fmt.Sprintf("Ready %q %q %q", st, reason, msg)
			}
			return ""
		})
		// Backoff doubles from 5 ms: over 3 s about ten attempts
		// (the tenth waits 2.56 s); without backoff there would be
		// thousands.
		time.Sleep(3*time.Second - time.Since(start))
		window := time.Since(start)
		attempts := a.metric("setpoint_controller_reconcile_total", `controller="replicagroup"`, `result="error"`) - errorsBefore
		retries := a.metric("setpoint_workqueue_retries_total", `"replicagroup"`)
		t.Logf("over %s: %v failed reconciles, %v queue retries", window.Round(time.Millisecond), attempts, retries)
		if attempts < 3 || attempts > 40 {
			t.Errorf("%v failed reconciles over %s: want exponential backoff (3..40)", attempts, window)
		}
		if retries < attempts-1 {
			t.Errorf("setpoint_workqueue_retries_total = %v, want >= %v", retries, attempts-1)
		}
		if n := len(a.list(accReplicas, "")); n != 0 {
			t.Errorf("%d replicas of a failing group", n)
		}
		// Fixing the spec recovers: the change is reconciled at once.
		a.must("PATCH", accGroups+"/too-big", "application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`), 200)
		a.eventually("group recovered", 2*time.Minute, func() string {
			g, _ := a.get(accGroups + "/too-big")
			st, _, msg, gen := g.ready()
			if st != "True" || gen != g.Metadata.Generation || g.Status.Replicas != 3 || g.Status.State != "Ready" {
				return fmt.Sprintf("Ready %q (%s), replicas %d, state %q", st, msg, g.Status.Replicas, g.Status.State)
			}
			return ""
		})
		a.must("DELETE", accGroups+"/too-big", "", nil, 200, 202)
	})

	t.Run("hot swap during a run leaves nothing stuck", func(t *testing.T) {
		a.t = t
		// Creates, one every 60 ms (at most 200, 12 s), go on while both
		// swaps land and for a second after the second version serves, so
		// that widgets arrive and are reconciled across both swaps.
		const m = 200
		done := make(chan error, 1)
		var created atomic.Int64
		stop := make(chan struct{})
		go func() { done <- a.createWidgetsUntil("swap", "swap", m, 60*time.Millisecond, &created, stop) }()
		var digest string
		var swapErr error
		for i := range 2 {
			time.Sleep(time.Second)
			digest, swapErr = a.swap(withCustomSection(widgetModule, fmt.Sprintf("acceptance-swap-%d", i)))
			if swapErr != nil {
				break
			}
			t.Logf("swap %d to %s applied after %d creates", i+1, digest[:19], created.Load())
		}
		if swapErr == nil {
			a.pluginLoaded("widget", digest)
			t.Logf("the second swap's version serves after %d creates", created.Load())
			time.Sleep(time.Second)
		}
		close(stop)
		if err := errors.Join(<-done, swapErr); err != nil {
			t.Fatal(err)
		}
		n := int(created.Load())
		total += n
		took := a.eventually("widgets created across two swaps converged", accConvergeLimit, func() string {
			return a.widgetsConverged(accPhaseLabel+"=swap", n)
		})
		t.Logf("%d widgets created across two hot swaps converged %s after the last create", n, took.Round(time.Millisecond))
	})

	t.Run("restart during a run converges with nothing lost", func(t *testing.T) {
		a.t = t
		const m = 200
		if err := a.createWidgets("restart", "restart", m, 0, nil); err != nil {
			t.Fatal(err)
		}
		total += m
		pending := a.widgetsConverged(accPhaseLabel+"=restart", m)
		s.Restart()
		t.Logf("restarted (SIGTERM) when: %s", cmp.Or(pending, "all converged already"))
		took := a.eventually("every widget converged after the restart", accConvergeLimit, func() string {
			return a.widgetsConverged("", total)
		})
		if got := len(a.list(accProvisions, "")); got != total {
			t.Errorf("%d WidgetProvisions for %d widgets", got, total)
		}
		t.Logf("after a restart right after %d creates: all %d widgets converged in %s", m, total, took.Round(time.Millisecond))
	})

	t.Run("crash during a run converges with nothing lost", func(t *testing.T) {
		a.t = t
		const m = 200
		// Every create below was acknowledged before the kill, so each of
		// these widgets must be there afterwards, and reconciled once: a
		// lost widget fails the count, a lost child or status the
		// convergence, a duplicated child the count of WidgetProvisions.
		if err := a.createWidgets("crash", "crash", m, 0, nil); err != nil {
			t.Fatal(err)
		}
		total += m
		pending := a.widgetsConverged(accPhaseLabel+"=crash", m)
		s.Crash()
		t.Logf("killed (SIGKILL) and restarted when: %s", cmp.Or(pending, "all converged already"))
		if got := len(a.list(accWidgets, accPhaseLabel+"=crash")); got != m {
			t.Fatalf("%d of the %d acknowledged widgets survived the crash", got, m)
		}
		took := a.eventually("every widget converged after the crash", accConvergeLimit, func() string {
			return a.widgetsConverged("", total)
		})
		if got := len(a.list(accProvisions, "")); got != total {
			t.Errorf("%d WidgetProvisions for %d widgets", got, total)
		}
		t.Logf("after a crash right after %d creates: all %d widgets converged in %s", m, total, took.Round(time.Millisecond))
	})
}
