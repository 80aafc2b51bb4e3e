package apiserver

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// uiBrowser starts a headless chromium (Debian's, or $CHROMIUM) with a
// fresh profile and returns a tab; without one the test skips, except under
// CI=true. Uncaught page exceptions fail the test.
func uiBrowser(t *testing.T) context.Context {
	t.Helper()
	p := os.Getenv("CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not found at %s (run `make deps`): %v", p, err)
		}
		t.Skipf("chromium not found at %s", p)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(p), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	var problems []string
	done := make(chan struct{})
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			select {
			case <-done:
			default:
				problems = append(problems, e.ExceptionDetails.Text)
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		close(done)
		for _, p := range problems {
			t.Errorf("uncaught exception in the page: %s", p)
		}
	})
	return ctx
}

func uiEval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func uiWait(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		main, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('main') || {}).textContent || ''`))
		t.Fatalf("%s: not within 10s (page: %.300s): %v", what, main, err)
	}
}

// uiSignIn signs in to the UI at base with token, working in namespace.
func uiSignIn(t *testing.T, ctx context.Context, base, token, namespace string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("signin-token")),
		chromedp.SendKeys(chromedp.ID("signin-token"), token),
		chromedp.SendKeys(chromedp.ID("signin-namespace"), namespace),
		chromedp.Click(chromedp.ID("signin-submit")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
}

const navKinds = `[...document.querySelectorAll('#kinds a')].map(a => a.dataset.route).join(' ')`

// TestWebUIShowsWhatTheUserMayWatch signs in to the web UI in a real
// chromium as users the authorizer restricts: each sees only the kinds it
// may list and watch, in the namespace it may, and a refusal names the user,
// the verb, the resource and the namespace.
func TestWebUIShowsWhatTheUserMayWatch(t *testing.T) {
	ctx := uiBrowser(t)
	s := newAuthzServerTLS(t, false)
	s.setupWidgets(t)
	for _, ns := range []string{"a", "b"} {
		s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: widgetsIn(ns),
			body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w-` + ns + `"},"spec":{"name":"W","size":"small"}}`})
	}
	const widgets = "#/k/example.setpoint.dev/v1/widgets"

	// ann may watch widgets in a only: the navigation shows that kind alone,
	// the table a's widget alone.
	uiSignIn(t, ctx, s.URL, "ann-token", "a")
	uiWait(t, ctx, "ann's kinds", `document.querySelectorAll('#kinds a').length > 0`)
	if got := uiEval[string](t, ctx, navKinds); got != widgets {
		t.Errorf("ann sees kinds %q, want only %q", got, widgets)
	}
	if got := uiEval[string](t, ctx, `document.getElementById('whoami').textContent`); got != "Signed in as ann" {
		t.Errorf("whoami shows %q", got)
	}
	uiEval[chromedp.Void](t, ctx, `location.hash = `+strconv.Quote(widgets))
	uiWait(t, ctx, "a's widget", `document.querySelector('#objects tr[data-key="a/w-a"]')`)
	if keys := uiEval[string](t, ctx, `[...document.querySelectorAll('#objects tbody tr')].map(tr => tr.dataset.key).join()`); keys != "a/w-a" {
		t.Errorf("ann's table: %q", keys)
	}

	// In all namespaces, where ann may not list, the page says so.
	uiEval[chromedp.Void](t, ctx, `location.hash = `+strconv.Quote(widgets))
	uiWait(t, ctx, "the namespace filter", `document.getElementById('filter-namespace')`)
	uiEval[chromedp.Void](t, ctx, `{ const s = document.getElementById('filter-namespace'); s.value = ''; s.dispatchEvent(new Event('change')); }`)
	uiWait(t, ctx, "the refusal", `(document.getElementById('objects-error') || {}).textContent`)
	if got, want := uiEval[string](t, ctx, `document.getElementById('objects-error').textContent`), "You (user ann) may not list and watch widgets in all namespaces."; got != want {
		t.Errorf("all namespaces: %q, want %q", got, want)
	}

	// bob may watch nothing.
	uiSignIn(t, ctx, s.URL, "bob-token", "")
	uiWait(t, ctx, "bob's home page", `document.querySelector('#main .sub') && document.querySelector('#main .sub').textContent.startsWith('0 kinds')`)
	if got := uiEval[string](t, ctx, navKinds); got != "" {
		t.Errorf("bob sees kinds %q", got)
	}

	// The admin sees every kind.
	uiSignIn(t, ctx, s.URL, "admin-token", "")
	uiWait(t, ctx, "the admin's kinds", `document.querySelector('#kinds a[data-route="`+widgets+`"]') && document.querySelector('#kinds a[data-route="#/k/core/v1/namespaces"]')`)
	if got := uiEval[string](t, ctx, `document.getElementById('whoami').textContent`); got != "Signed in as setpoint-admin" {
		t.Errorf("whoami shows %q", got)
	}
}

// rightsChecked is true once the page has its answers to which actions the
// user may take (create, edit, delete): only then does a missing button
// mean anything.
const rightsChecked = `[...document.querySelectorAll('#create-slot, #edit-slot, #delete-slot')].every(e => e.dataset.access === 'checked') &&
	document.querySelectorAll('#create-slot, #edit-slot, #delete-slot').length > 0`

// uiButtons lists the write buttons the page shows, once it knows the
// user's rights.
func uiButtons(t *testing.T, ctx context.Context, what string) string {
	t.Helper()
	uiWait(t, ctx, what, rightsChecked)
	return uiEval[string](t, ctx, `['object-create', 'object-edit', 'object-delete'].filter(id => document.getElementById(id)).join(' ')`)
}

// TestWebUIOffersWhatTheUserMayDo signs in to the web UI in a real chromium
// as users the authorizer restricts: the Create, Edit and Delete buttons
// show by the user's rights (SelfSubjectAccessReview), not by the verbs the
// resource serves; a right taken away after the page was drawn meets the
// server's refusal, which reads as a sentence. The RoleBindings table
// names each binding's role by kind and name, and its subjects.
func TestWebUIOffersWhatTheUserMayDo(t *testing.T) {
	ctx := uiBrowser(t)
	s := newAuthzServerTLS(t, false)
	s.setupWidgets(t)
	s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: widgetsIn("a"),
		body: `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w-a"},"spec":{"name":"W","size":"small"}}`})
	const widgets = "#/k/example.setpoint.dev/v1/widgets"
	page := func(hash string) { uiEval[chromedp.Void](t, ctx, `location.hash = `+strconv.Quote(hash)) }

	// rita reads widgets in a, and may change nothing: no write button.
	uiSignIn(t, ctx, s.URL, "rita-token", "a")
	page(widgets)
	uiWait(t, ctx, "rita's table", `document.querySelector('#objects tr[data-key="a/w-a"]')`)
	if got := uiButtons(t, ctx, "rita's rights on the table"); got != "" {
		t.Errorf("rita, who may only read, sees %q on the table", got)
	}
	page(widgets + "/a/w-a")
	uiWait(t, ctx, "rita's object page", `document.getElementById('object-yaml').textContent.includes('w-a')`)
	if got := uiButtons(t, ctx, "rita's rights on the object"); got != "" {
		t.Errorf("rita, who may only read, sees %q on the object", got)
	}

	// ann may create, patch and update widgets in a, but not delete them.
	uiSignIn(t, ctx, s.URL, "ann-token", "a")
	page(widgets)
	uiWait(t, ctx, "ann's table", `document.querySelector('#objects tr[data-key="a/w-a"]')`)
	if got := uiButtons(t, ctx, "ann's rights on the table"); got != "object-create" {
		t.Errorf("ann sees %q on the table, want object-create", got)
	}
	page(widgets + "/a/w-a")
	if got := uiButtons(t, ctx, "ann's rights on the object"); got != "object-edit" {
		t.Errorf("ann sees %q on the object, want object-edit", got)
	}

	// Given delete, ann sees Delete; taken away again before she clicks,
	// the server refuses, and the 403 reads as a sentence.
	annRules := testRules["ann"]
	s.az.setRules("ann", append(slices.Clone(annRules),
		rule{verbs: []string{"delete"}, groups: []string{"example.setpoint.dev"}, resources: []string{"widgets"}, namespace: "a"}))
	uiSignIn(t, ctx, s.URL, "ann-token", "a")
	uiWait(t, ctx, "ann's kinds", `document.querySelectorAll('#kinds a').length > 0`)
	page(widgets + "/a/w-a")
	if got := uiButtons(t, ctx, "ann's rights with delete"); got != "object-edit object-delete" {
		t.Errorf("ann, given delete, sees %q, want object-edit object-delete", got)
	}
	s.az.setRules("ann", annRules)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("object-delete")), chromedp.Click(chromedp.ID("delete-yes"))); err != nil {
		t.Fatal(err)
	}
	uiWait(t, ctx, "the delete's refusal", `document.getElementById('delete-error').textContent`)
	if got, want := uiEval[string](t, ctx, `document.getElementById('delete-error').textContent`), "Delete failed: You (user ann) may not delete widgets in namespace a."; got != want {
		t.Errorf("delete refusal %q, want %q", got, want)
	}

	// The admin may do everything, and sees each RoleBinding's role as
	// kind/name and its subjects.
	s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings",
		body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"viewers"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
		"subjects":[{"kind":"User","name":"ann"},{"kind":"Group","name":"team"},{"kind":"ServiceAccount","name":"robot"}]}`})
	s.mustDo(t, "admin-token", http.StatusCreated, request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings",
		body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"editors"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"edit-widgets"},
		"subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"b"}]}`})
	uiSignIn(t, ctx, s.URL, "admin-token", "a")
	page(widgets + "/a/w-a")
	if got := uiButtons(t, ctx, "the admin's rights on the object"); got != "object-edit object-delete" {
		t.Errorf("the admin sees %q on the object, want object-edit object-delete", got)
	}
	page("#/k/rbac.authorization.k8s.io/v1/rolebindings")
	cell := func(key, col string) string {
		return `(document.querySelector('#objects tr[data-key="` + key + `"] td[data-col="` + col + `"]') || {}).textContent`
	}
	uiWait(t, ctx, "the bindings' roles", cell("a/editors", "Role")+` === 'Role/edit-widgets' && `+cell("a/viewers", "Role")+` === 'ClusterRole/view'`)
	for key, want := range map[string]string{
		"a/viewers": "User ann, Group team, ServiceAccount a/robot",
		"a/editors": "ServiceAccount b/ci",
	} {
		if got := uiEval[string](t, ctx, cell(key, "Subjects")); got != want {
			t.Errorf("%s: subjects %q, want %q", key, got, want)
		}
	}
}
