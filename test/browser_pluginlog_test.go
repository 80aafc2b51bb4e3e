package test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestBrowserPluginLog opens a Plugin's page in chromium: it shows the
// plugin's log live, from the log subresource, and filters it by object.
func TestBrowserPluginLog(t *testing.T) {
	chromiumPath(t)
	faulty := wasmModule(t, "faulty")
	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-log-rate", "20", "--plugin-log-burst", "50"}})
	if out, errOut, err := s.KubectlInput(looseGizmoCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	ok(t, s, "plugin", "install", "loud", "--wasm", faulty, "--reconcile", "gizmos", "--config", "mode=flood")
	if out, errOut, err := s.KubectlInput("apiVersion: example.setpoint.dev/v1\nkind: Gizmo\nmetadata: {name: z1, namespace: default}\nspec: {}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("apply gizmo: %v\n%s%s", err, out, errOut)
	}
	ctx := browser(t, s)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("signin-token")),
		chromedp.SendKeys(chromedp.ID("signin-token"), s.Token),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("plugins-nav")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	evalJS[chromedp.Void](t, ctx, `location.hash = '#/k/setpoint.dev/v1alpha1/plugins/_/loud'`)
	d := waitJS(t, ctx, "the plugin's log", `(document.getElementById('plugin-log') || {}).textContent?.includes('Gizmo default/z1 flood')`, 30*time.Second)
	waitJS(t, ctx, "the drop note", `document.getElementById('plugin-log').textContent.match(/WARN - \d+ lines dropped/)`, 30*time.Second)
	t.Logf("log shown %v after opening the page, %d lines", d.Round(time.Millisecond), evalJS[int](t, ctx, `document.getElementById('plugin-log').childElementCount`))
	if n := evalJS[int](t, ctx, `document.getElementById('plugin-log').childElementCount`); n > 500 {
		t.Errorf("the page holds %d log lines, want at most 500", n)
	}

	// A filter on another object empties the view; on z1 it shows its lines.
	evalJS[chromedp.Void](t, ctx, `document.getElementById('plugin-log-object').value = 'Gizmo/nope';
		document.getElementById('plugin-log-object').form.requestSubmit()`)
	waitJS(t, ctx, "the filtered log is empty", `document.getElementById('plugin-log').childElementCount === 0 &&
		document.getElementById('plugin-log-state').dataset.state === 'live'`, 10*time.Second)
	evalJS[chromedp.Void](t, ctx, `document.getElementById('plugin-log-object').value = 'Gizmo/z1';
		document.getElementById('plugin-log-object').form.requestSubmit()`)
	waitJS(t, ctx, "z1's lines", `document.getElementById('plugin-log').textContent.includes('Gizmo default/z1 flood') &&
		!document.getElementById('plugin-log').textContent.includes('lines dropped')`, 10*time.Second)
	// New lines arrive live: a change reconciles z1 again.
	before := evalJS[int](t, ctx, `document.getElementById('plugin-log').childElementCount`)
	if out, errOut, err := s.Kubectl("label", "gizmo", "z1", "poke=1", "--overwrite"); err != nil {
		t.Fatalf("label gizmo: %v %s%s", err, out, errOut)
	}
	waitJS(t, ctx, "new lines live", `document.getElementById('plugin-log').childElementCount > `+strconv.Itoa(before)+` ||
		document.getElementById('plugin-log').childElementCount === 500`, 30*time.Second)
	screenshot(t, ctx, "plugin-log.png")

	// A restart drops the stream: the page reconnects from the last line
	// it showed and goes on with the lines the plugin logs after it.
	evalJS[chromedp.Void](t, ctx, `window.__logStates = []; new MutationObserver(() =>
		window.__logStates.push(document.getElementById('plugin-log-state').dataset.state))
		.observe(document.getElementById('plugin-log-state'), {attributes: true});
		window.__lastLine = document.getElementById('plugin-log').lastElementChild.textContent`)
	s.Restart()
	waitJS(t, ctx, "the log view reconnects and shows new lines", `window.__logStates.includes('reconnecting') &&
		document.getElementById('plugin-log-state').dataset.state === 'live' &&
		document.getElementById('plugin-log').lastElementChild.textContent !== window.__lastLine`, 60*time.Second)
	lines := evalJS[[]string](t, ctx, `[...document.getElementById('plugin-log').children].map(d => d.textContent)`)
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("line shown twice after reconnecting: %s", l)
		}
		seen[l] = true
	}
}
