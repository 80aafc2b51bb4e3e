package test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/webui"
	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// chromiumPath finds Debian's chromium ($CHROMIUM overrides). Without it the
// browser tests skip, except under CI=true, where they fail: `make deps`
// installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not found at %s (run `make deps`): %v", p, err)
		}
		t.Skipf("chromium not found at %s (run `make deps`)", p)
	}
	return p
}

// caSPKIHash is the base64 SHA-256 of the server CA's public key, which
// chromium's --ignore-certificate-errors-spki-list accepts: the test browser
// trusts certificates chained to this CA key and no others.
func caSPKIHash(t *testing.T, s *testserver.Server) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("ca.crt: no PEM block")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// browser starts a headless chromium with a fresh profile that trusts s's CA
// and returns a tab context. Uncaught page exceptions fail the test.
func browser(t *testing.T, s *testserver.Server) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("ignore-certificate-errors-spki-list", caSPKIHash(t, s)),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			mu.Lock()
			problems = append(problems, msg)
			mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				t.Logf("console.error: %s", strings.Join(parts, " "))
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("uncaught exception in the page: %s", p)
		}
	})
	return ctx
}

// waitJS polls expr in the page until it is truthy and returns how long it took.
func waitJS(t *testing.T, ctx context.Context, what, expr string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout))); err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('conn') || {dataset: {}}).dataset.state || ''`))
		events, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(window.events || []).join()`))
		t.Fatalf("%s: not within %v (connection %q, events %q): %v", what, timeout, state, events, err)
	}
	return time.Since(start)
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func rowJS(key string) string {
	return fmt.Sprintf(`document.querySelector('#objects tr[data-key=%q]')`, key)
}

func cellJS(key, col string) string {
	return fmt.Sprintf(`(document.querySelector('#objects tr[data-key=%q] td[data-col=%q]') || {}).textContent`, key, col)
}

// TestBrowserUI signs in to the web UI in a real chromium, watches the
// Widget table change live as objects are written through the API, and sees
// it reconnect and converge across a server restart without a reload.
func TestBrowserUI(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t, testserver.Options{})
	w := wsSetupWidgets(t, s)
	w.create("alpha", "small", map[string]string{"env": "dev"})
	ctx := browser(t, s)

	// Sign in.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("signin-token")),
		chromedp.SendKeys(chromedp.ID("signin-token"), "wrong-token"),
		chromedp.Click(chromedp.ID("signin-submit")),
	); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	waitJS(t, ctx, "a wrong token is refused", `document.getElementById('signin-error').textContent.includes('not accepted')`, 5*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('signin-token').value = ''`),
		chromedp.SendKeys(chromedp.ID("signin-token"), s.Token),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#kinds a[data-route="#/k/example.setpoint.dev/v1/widgets"]`)),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if stored := evalJS[string](t, ctx, `sessionStorage.getItem('setpoint.token')`); stored != s.Token {
		t.Fatal("the token is not in sessionStorage")
	}
	if local := evalJS[int](t, ctx, `localStorage.length`); local != 0 {
		t.Fatalf("localStorage holds %d items; the token must stay in sessionStorage", local)
	}

	// Open the kind: the table shows the printer columns and alpha.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#kinds a[data-route="#/k/example.setpoint.dev/v1/widgets"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "alpha in the table", rowJS("default/alpha"), 10*time.Second)
	waitJS(t, ctx, "the watch is live", `document.getElementById('conn').dataset.state === 'live'`, 10*time.Second)
	heads := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#objects th')].map(th => th.textContent)`)
	if want := "Namespace Name Size State Ready Age"; strings.Join(heads, " ") != want {
		t.Fatalf("columns %q, want %q", heads, want)
	}

	// Each change through the API shows within 1 s.
	const within = time.Second
	w.create("beta", "small", nil)
	d1 := waitJS(t, ctx, "created beta shows", rowJS("default/beta")+` && `+cellJS("default/beta", "Size")+` === 'small'`, within)
	w.setSize("beta", "large")
	d2 := waitJS(t, ctx, "beta's new size shows", cellJS("default/beta", "Size")+` === 'large'`, within)
	w.remove("beta")
	d3 := waitJS(t, ctx, "deleted beta goes", `!`+rowJS("default/beta"), within)
	t.Logf("API write to table: create %v, modify %v, delete %v", d1.Round(time.Millisecond), d2.Round(time.Millisecond), d3.Round(time.Millisecond))

	// Status written through /status: the State printer column and Ready.
	w.call("PATCH", wsWidgetsPath+"/alpha/status", "application/merge-patch+json", map[string]any{"status": map[string]any{
		"state": "provisioned", "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Provisioned",
			"message": "one child provisioned", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}})
	waitJS(t, ctx, "alpha's status shows", cellJS("default/alpha", "State")+` === 'provisioned' && `+cellJS("default/alpha", "Ready")+` === 'True'`, within)

	// Restart the server: the page reconnects and converges, no reload.
	evalJS[chromedp.Void](t, ctx, `window.__sameDocument = 42; window.__states = [];
		new MutationObserver(() => window.__states.push(document.getElementById('conn').dataset.state))
			.observe(document.getElementById('conn'), {attributes: true});`)
	s.Restart()
	w.create("gamma", "medium", nil)
	w.setSize("alpha", "large")
	waitJS(t, ctx, "the page converges after the restart",
		rowJS("default/gamma")+` && `+cellJS("default/gamma", "Size")+` === 'medium' && `+cellJS("default/alpha", "Size")+` === 'large'`, 30*time.Second)
	waitJS(t, ctx, "the watch is live again", `document.getElementById('conn').dataset.state === 'live'`, 10*time.Second)
	if same := evalJS[int](t, ctx, `window.__sameDocument || 0`); same != 42 {
		t.Fatal("the page was reloaded")
	}
	states := evalJS[[]string](t, ctx, `window.__states`)
	if !strings.Contains(strings.Join(states, " "), "reconnecting") {
		t.Fatalf("connection states during the restart %v: the indicator never showed reconnecting", states)
	}
	w.create("delta", "large", nil)
	d4 := waitJS(t, ctx, "a change after reconnecting shows", rowJS("default/delta"), within)
	t.Logf("after the restart: states %v, new object shown in %v", states, d4.Round(time.Millisecond))

	// The Plugin kind is served: the plugins section lists them live with
	// their Ready status.
	waitJS(t, ctx, "the plugins section", `!document.getElementById('plugins-nav').hidden`, 5*time.Second)
	w.call("POST", "/apis/setpoint.dev/v1alpha1/plugins", "application/json", map[string]any{
		"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin", "metadata": map[string]any{"name": "widget-logic"},
		"spec": map[string]any{"module": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)}},
	})
	waitJS(t, ctx, "the plugin is listed with the status the server gave it (its module was never uploaded)",
		`[...document.querySelectorAll('#plugins a')].some(a => a.textContent.startsWith('widget-logic') &&
			a.querySelector('.pill.False') && ['Pending', 'Failed'].includes(a.querySelector('.pill').textContent))`, 10*time.Second)
	t.Logf("plugin entry: %q (%s)", evalJS[string](t, ctx, `document.getElementById('plugins').textContent`),
		evalJS[string](t, ctx, `document.querySelector('#plugins .pill').title`))
	screenshot(t, ctx, "widgets.png")

	// The Plugin table: Phase is read from the watched object, Ready (a
	// JSONPath filter) from the server's Table.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("plugins-all"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the plugin table", cellJS("widget-logic", "Phase")+` === 'Pending' && `+cellJS("widget-logic", "Ready")+` === 'False'`, 5*time.Second)
	screenshot(t, ctx, "plugins.png")
	evalJS[chromedp.Void](t, ctx, `location.hash = '#/k/example.setpoint.dev/v1/widgets'`)

	// Object detail: YAML and the owner link.
	uid := w.call("GET", wsWidgetsPath+"/alpha", "", nil).UID
	child := map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "alpha-part", "ownerReferences": []any{map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "name": "alpha", "uid": uid, "controller": true}}},
		"spec": map[string]any{"name": "alpha-part", "size": "small"},
	}
	w.call("POST", wsWidgetsPath, "application/json", child)
	w.call("POST", "/api/v1/namespaces/default/events", "application/json", map[string]any{
		"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "alpha.provisioned"},
		"involvedObject": map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "namespace": "default", "name": "alpha", "uid": uid},
		"reason":         "Provisioned", "message": "created Widget/alpha-part", "type": "Normal", "count": 1,
		"firstTimestamp": time.Now().UTC().Format(time.RFC3339), "lastTimestamp": time.Now().UTC().Format(time.RFC3339),
	})
	evalJS[chromedp.Void](t, ctx, `location.hash = '#/k/example.setpoint.dev/v1/widgets/default/alpha'`)
	waitJS(t, ctx, "alpha's YAML", `(document.getElementById('object-yaml') || {}).textContent?.includes('size: large')`, 5*time.Second)
	waitJS(t, ctx, "alpha's child", `(document.getElementById('object-children') || {}).textContent?.includes('Widget/alpha-part')`, 5*time.Second)
	waitJS(t, ctx, "alpha's event", `(document.getElementById('object-events') || {}).textContent?.includes('created Widget/alpha-part')`, 5*time.Second)
	w.setSize("alpha", "medium")
	waitJS(t, ctx, "the detail follows changes", `document.getElementById('object-yaml').textContent.includes('size: medium')`, within)
	screenshot(t, ctx, "widget-detail.png")

	// Sign out forgets the token.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("signout"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "signed out", `!document.getElementById('signin').hidden && sessionStorage.getItem('setpoint.token') === null`, 5*time.Second)
}

// TestBrowserClientRelistsAfterCompaction drives setpoint.js in chromium
// against the real server with a tiny --history-* window: the page drops the
// watch's messages (as a partition would) while the objects change and the
// server compacts past the client's resourceVersion, then closes the socket;
// the client resumes at once, gets 410, relists, reports the difference
// once, and follows the watch again.
func TestBrowserClientRelistsAfterCompaction(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t, testserver.Options{Args: tinyHistory})
	w := wsSetupWidgets(t, s)
	rvA := w.create("a", "small", nil)
	rvB := w.create("b", "small", nil)
	ctx := browser(t, s)
	// window.__partition drops the messages of every WebSocket the page opens.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/ui/"),
		chromedp.Evaluate[chromedp.Void](`window.events = []; window.sockets = []; window.__partition = false;
			window.WebSocket = class extends WebSocket {
				constructor(...args) { super(...args); window.sockets.push(this); }
				set onmessage(f) { super.onmessage = m => { if (!window.__partition) f(m); }; }
			};
			import('/ui/setpoint.js').then(m => {
				window.w = m.watch('/apis/example.setpoint.dev/v1/widgets', {token: `+strconv.Quote(s.Token)+`, backoff: {initial: 50, max: 200}},
					ev => window.events.push(ev.type + (ev.object ? ' ' + ev.object.metadata.name + '@' + ev.object.metadata.resourceVersion : '')));
			});`)); err != nil {
		t.Fatal(err)
	}
	want := "ADDED a@" + rvA + ",ADDED b@" + rvB + ",SYNCED"
	waitJS(t, ctx, "first list", `window.events.join() === `+strconv.Quote(want), 10*time.Second)
	rvA = w.setSize("a", "large")
	want += ",MODIFIED a@" + rvA
	waitJS(t, ctx, "a live event", `window.events.join() === `+strconv.Quote(want), 5*time.Second)

	evalJS[chromedp.Void](t, ctx, `window.__partition = true`)
	w.remove("a")
	w.create("c", "small", nil)
	for i := range 10 {
		w.setSize("c", []string{"medium", "large"}[i%2])
	}
	rvB = w.setSize("b", "medium")
	rvC := w.setSize("c", "small")
	testsupport.Eventually(t, 20*time.Second, "resourceVersion "+rvA+" compacted once it left the compaction window", func() bool {
		return wsExpired(t, s, rvA)
	})
	if got := evalJS[string](t, ctx, `window.events.join()`); got != want {
		t.Fatalf("events during the partition: %s", strings.TrimPrefix(got, want))
	}
	evalJS[chromedp.Void](t, ctx, `window.__partition = false; window.sockets.at(-1).close(1000)`)

	want += ",MODIFIED b@" + rvB + ",ADDED c@" + rvC + ",DELETED a@" + rvA + ",SYNCED"
	waitJS(t, ctx, "relist after 410", `window.events.join() === `+strconv.Quote(want), 10*time.Second)
	rvD := w.create("d", "large", nil)
	want += ",ADDED d@" + rvD
	waitJS(t, ctx, "the watch follows again", `window.events.join() === `+strconv.Quote(want), 5*time.Second)
	names := evalJS[string](t, ctx, `window.w.items().map(o => o.metadata.name).join()`)
	rv := evalJS[string](t, ctx, `window.w.resourceVersion`)
	stats := evalJS[string](t, ctx, `window.w.stats.lists + ' lists, ' + window.w.stats.relists410 + ' relists on 410'`)
	if names != "b,c,d" || rv != rvD || stats != "2 lists, 1 relists on 410" {
		t.Fatalf("cache %q at %q after %s; want b,c,d at %s after 2 lists, 1 relists on 410", names, rv, stats, rvD)
	}
	evalJS[chromedp.Void](t, ctx, `window.w.stop()`)
	waitJS(t, ctx, "stopped", `window.w.state === 'stopped'`, 5*time.Second)
}

// wsExpired tells whether a WebSocket watch of the widgets from rv gets a 410.
func wsExpired(t *testing.T, s *testserver.Server, rv string) bool {
	t.Helper()
	c := wsMustWatch(t, s, url.Values{"resourceVersion": {rv}})
	defer c.Close()
	ev, err := readWSEvent(c, 10*time.Second)
	return err == nil && ev.Type == "ERROR" && ev.Object.Code == http.StatusGone
}

// TestBrowserClientRelistsOn410 drives setpoint.js in chromium against a
// small API that answers 410 and sends events at will, for what the real
// server does not send (TestBrowserClientRelistsAfterCompaction covers the
// real one): the client lists, watches, resumes after the watch ends,
// relists when the resourceVersion is gone, reports the difference once,
// and ignores a stale event.
func TestBrowserClientRelistsOn410(t *testing.T) {
	chromiumPath(t)
	type item struct{ name, rv string }
	var (
		mu        sync.Mutex
		items     []item
		listRV    string
		compacted int
		lists     int
		watchRVs  []string
		current   = make(chan *clientWatch, 4)
	)
	set := func(rv string, c int, it ...item) {
		mu.Lock()
		defer mu.Unlock()
		items, listRV, compacted = it, rv, c
	}
	ws, err := wswatch.New(wswatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", webui.New())
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>client</title>"))
	})
	mux.HandleFunc("/apis/example.setpoint.dev/v1/widgets", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			mu.Lock()
			lists++
			var out []string
			for _, it := range items {
				out = append(out, fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"resourceVersion":%q}}`, it.name, it.rv))
			}
			body := fmt.Sprintf(`{"kind":"WidgetList","apiVersion":"example.setpoint.dev/v1","metadata":{"resourceVersion":%q},"items":[%s]}`, listRV, strings.Join(out, ","))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
			return
		}
		_ = ws.Serve(w, r, func(ctx context.Context) (watch.Interface, error) {
			rv := r.URL.Query().Get("resourceVersion")
			n, _ := strconv.Atoi(rv)
			mu.Lock()
			watchRVs = append(watchRVs, rv)
			gone := n < compacted
			mu.Unlock()
			if gone {
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s", rv))
			}
			cw := &clientWatch{ch: make(chan watch.Event, 8)}
			current <- cw
			return cw, nil
		})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	set("10", 0, item{"a", "3"}, item{"b", "4"})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"),
		chromedp.Evaluate[chromedp.Void](`window.events = [];
			import('/ui/setpoint.js').then(m => {
				window.w = m.watch('/apis/example.setpoint.dev/v1/widgets', {token: 'tok', backoff: {initial: 50, max: 200}},
					ev => window.events.push(ev.type + (ev.object ? ' ' + ev.object.metadata.name + '@' + ev.object.metadata.resourceVersion : '')));
			});`)); err != nil {
		t.Fatal(err)
	}
	obj := func(name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.setpoint.dev/v1")
		u.SetKind("Widget")
		u.SetName(name)
		u.SetResourceVersion(rv)
		return u
	}
	next := func() *clientWatch {
		select {
		case cw := <-current:
			return cw
		case <-time.After(10 * time.Second):
			t.Fatal("the client did not open a watch")
			return nil
		}
	}
	w1 := next()
	w1.ch <- watch.Event{Type: watch.Modified, Object: obj("a", "11")}
	waitJS(t, ctx, "first list and event", `window.events.join() === 'ADDED a@3,ADDED b@4,SYNCED,MODIFIED a@11'`, 5*time.Second)

	// History is compacted past 11 and the objects change; the watch ends.
	set("105", 100, item{"b", "101"}, item{"c", "102"})
	close(w1.ch)
	w2 := next()
	w2.ch <- watch.Event{Type: watch.Modified, Object: obj("b", "101")} // already listed: ignored
	w2.ch <- watch.Event{Type: watch.Added, Object: obj("d", "106")}
	waitJS(t, ctx, "relist after 410", `window.events.join() === 'ADDED a@3,ADDED b@4,SYNCED,MODIFIED a@11,`+
		`MODIFIED b@101,ADDED c@102,DELETED a@11,SYNCED,ADDED d@106'`, 5*time.Second)
	names := evalJS[string](t, ctx, `window.w.items().map(o => o.metadata.name).join()`)
	rv := evalJS[string](t, ctx, `window.w.resourceVersion`)
	mu.Lock()
	gotLists, gotRVs := lists, strings.Join(watchRVs, ",")
	mu.Unlock()
	if names != "b,c,d" || rv != "106" || gotLists != 2 || gotRVs != "10,11,105" {
		t.Fatalf("cache %q at %q after %d lists, watches from %s; want b,c,d at 106 after 2 lists, watches from 10,11,105", names, rv, gotLists, gotRVs)
	}
	evalJS[chromedp.Void](t, ctx, `window.w.stop()`)
	waitJS(t, ctx, "stopped", `window.w.state === 'stopped'`, 5*time.Second)
}

// clientWatch is a watch the test feeds.
type clientWatch struct {
	ch chan watch.Event
}

func (w *clientWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *clientWatch) Stop()                          {}
