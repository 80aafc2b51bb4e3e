package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

const widgetsRoute = "#/k/example.setpoint.dev/v1/widgets"

// uiOpen signs in to the web UI with the admin token and opens route.
func uiOpen(t *testing.T, ctx context.Context, s *testserver.Server, route string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("signin-token")),
		chromedp.SendKeys(chromedp.ID("signin-token"), s.Token),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#kinds a[data-route="`+widgetsRoute+`"]`)),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	evalJS[chromedp.Void](t, ctx, `location.hash = `+strconv.Quote(route))
}

// setValue sets a form field as typing would and fires its input event.
func setValue(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	evalJS[chromedp.Void](t, ctx, `{ const el = document.getElementById(`+strconv.Quote(id)+`);
		el.value = `+strconv.Quote(value)+`; el.dispatchEvent(new Event('input', {bubbles: true})); }`)
}

func click(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID(id))); err != nil {
		t.Fatalf("click #%s: %v", id, err)
	}
}

// review clicks Review changes and waits for its answer: a diff or an error.
func review(t *testing.T, ctx context.Context) {
	t.Helper()
	evalJS[chromedp.Void](t, ctx, `document.getElementById('edit-diff').hidden = true; document.getElementById('edit-error').replaceChildren()`)
	click(t, ctx, "edit-review")
	waitJS(t, ctx, "the review's answer", `!document.getElementById('edit-diff').hidden || document.getElementById('edit-error').textContent`, 5*time.Second)
	t.Logf("review: %s %s\n%s", evalJS[string](t, ctx, `document.getElementById("edit-state").textContent`), evalJS[string](t, ctx, `document.getElementById("edit-error").textContent`),
		evalJS[string](t, ctx, `[...document.querySelectorAll('#edit-diff div')].map(d => d.textContent).join('\n')`))
}

// rowKeys is the keys of the table's rows, in order.
const rowKeys = `[...document.querySelectorAll('#objects tbody tr')].map(tr => tr.dataset.key).join()`

// TestBrowserFilters narrows the Widget table by name (in the page), by a
// label selector (sent to the server; a bad one shows the server's error)
// and by namespace.
func TestBrowserFilters(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t, testserver.Options{})
	w := wsSetupWidgets(t, s)
	w.create("alpha", "small", map[string]string{"env": "dev"})
	w.create("beta", "large", map[string]string{"env": "prod"})
	w.create("alpine", "medium", map[string]string{"env": "prod"})
	if code, body, err := s.Do("POST", "/api/v1/namespaces", s.Token, strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-b"}}`)); err != nil || code >= 300 && code != http.StatusConflict {
		t.Logf("create namespace team-b: %d %s %v", code, body, err)
	}
	w.call("POST", "/apis/example.setpoint.dev/v1/namespaces/team-b/widgets", "application/json", map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gamma", "labels": map[string]string{"env": "prod"}},
		"spec":     map[string]any{"name": "gamma", "size": "small"},
	})
	ctx := browser(t, s)
	uiOpen(t, ctx, s, widgetsRoute)
	all := "default/alpha,default/alpine,default/beta,team-b/gamma"
	waitJS(t, ctx, "all four widgets", rowKeys+` === `+strconv.Quote(all), 10*time.Second)

	setValue(t, ctx, "filter-name", "ALP")
	waitJS(t, ctx, "the name filter keeps alpha and alpine", rowKeys+` === 'default/alpha,default/alpine' && document.getElementById('objects-count').textContent === '2 of 4'`, 2*time.Second)
	setValue(t, ctx, "filter-name", "")
	waitJS(t, ctx, "clearing the name filter", rowKeys+` === `+strconv.Quote(all), 2*time.Second)

	setValue(t, ctx, "filter-labels", "env=prod,app notin (x)")
	evalJS[chromedp.Void](t, ctx, `document.getElementById('filters').requestSubmit()`)
	waitJS(t, ctx, "the label selector keeps the prod widgets", rowKeys+` === 'default/alpine,default/beta,team-b/gamma'`, 5*time.Second)
	if v := evalJS[string](t, ctx, `document.getElementById('filter-labels').value`); v != "env=prod,app notin (x)" {
		t.Fatalf("the label selector box reads %q after the reload of the list", v)
	}
	// Names and labels combine.
	setValue(t, ctx, "filter-name", "n")
	waitJS(t, ctx, "name and labels together", rowKeys+` === 'default/alpine'`, 2*time.Second)
	// A new object that matches shows live, one that does not stays out.
	w.create("banana", "small", map[string]string{"env": "prod"})
	w.create("avocado", "small", map[string]string{"env": "dev"})
	waitJS(t, ctx, "a new matching object shows", rowKeys+` === 'default/alpine,default/banana'`, 2*time.Second)

	setValue(t, ctx, "filter-name", "")
	setValue(t, ctx, "filter-labels", "env in (prod")
	evalJS[chromedp.Void](t, ctx, `document.getElementById('filters').requestSubmit()`)
	waitJS(t, ctx, "a bad label selector shows the server's error", `document.getElementById('objects-error').textContent.includes('The server refused the list')`, 5*time.Second)
	t.Logf("bad selector: %s", evalJS[string](t, ctx, `document.getElementById('objects-error').textContent`))

	setValue(t, ctx, "filter-labels", "")
	evalJS[chromedp.Void](t, ctx, `document.getElementById('filters').requestSubmit()`)
	waitJS(t, ctx, "the error clears with a good selector", `document.getElementById('objects-error').textContent === '' && `+rowKeys+`.split(',').length === 6`, 5*time.Second)

	// Namespace selection: the list and watch are of that namespace only.
	waitJS(t, ctx, "team-b is offered", `[...document.querySelectorAll('#filter-namespace option')].some(o => o.value === 'team-b')`, 5*time.Second)
	evalJS[chromedp.Void](t, ctx, `{ const s = document.getElementById('filter-namespace'); s.value = 'team-b'; s.dispatchEvent(new Event('change')); }`)
	waitJS(t, ctx, "only team-b's widgets", rowKeys+` === 'team-b/gamma'`, 5*time.Second)
	w.create("delta", "small", nil)
	w.call("POST", "/apis/example.setpoint.dev/v1/namespaces/team-b/widgets", "application/json", map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": "epsilon"},
		"spec": map[string]any{"name": "epsilon", "size": "small"},
	})
	waitJS(t, ctx, "team-b's new widget shows, default's does not", rowKeys+` === 'team-b/epsilon,team-b/gamma'`, 2*time.Second)
	screenshot(t, ctx, "filters.png")
	evalJS[chromedp.Void](t, ctx, `{ const s = document.getElementById('filter-namespace'); s.value = ''; s.dispatchEvent(new Event('change')); }`)
	waitJS(t, ctx, "all namespaces again", `document.querySelectorAll('#objects tbody tr').length === 8`, 5*time.Second)
}

// widgetManagers GETs a widget and returns its status code and its field
// managers as "manager/operation".
func widgetManagers(t *testing.T, s *testserver.Server, name string) (int, map[string]any, []string) {
	t.Helper()
	code, body, err := s.Do("GET", wsWidgetsPath+"/"+name, s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Metadata struct {
			ManagedFields []struct{ Manager, Operation string } `json:"managedFields"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	_ = json.Unmarshal(body, &obj)
	var ms []string
	for _, m := range obj.Metadata.ManagedFields {
		ms = append(ms, m.Manager+"/"+m.Operation)
	}
	return code, obj.Spec, ms
}

// TestBrowserEditYAML creates a Widget from YAML in the browser (review the
// dry-run diff, then apply), sees an invalid edit refused with the server's
// causes shown, applies a valid edit, copies the YAML and deletes the object
// after confirming.
func TestBrowserEditYAML(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t, testserver.Options{})
	w := wsSetupWidgets(t, s)
	w.create("alpha", "small", nil)
	ctx := browser(t, s)
	uiOpen(t, ctx, s, widgetsRoute)
	waitJS(t, ctx, "the table", rowJS("default/alpha"), 10*time.Second)

	// Create.
	click(t, ctx, "object-create")
	waitJS(t, ctx, "the editor", `document.getElementById('edit-yaml')?.value.includes('kind: Widget')`, 2*time.Second)
	setValue(t, ctx, "edit-yaml", `apiVersion: example.setpoint.dev/v1
kind: Widget
metadata:
  name: from-ui   # typed in the browser
  labels:
    team: ui
spec:
  name: from-ui
  size: small
`)
	if !evalJS[bool](t, ctx, `document.getElementById('edit-apply').disabled`) {
		t.Fatal("Apply is enabled before the changes were reviewed")
	}
	review(t, ctx)
	waitJS(t, ctx, "the dry-run diff of a new object", `!document.getElementById('edit-diff').hidden &&
		[...document.querySelectorAll('#edit-diff .add')].some(d => d.textContent === '+   size: small') &&
		!document.querySelector('#edit-diff .del') && document.getElementById('edit-state').textContent === 'Creates a new object.'`, 5*time.Second)
	if code, _, _ := widgetManagers(t, s, "from-ui"); code != http.StatusNotFound {
		t.Fatalf("the review created the object (GET: %d): it must be a dry run", code)
	}
	click(t, ctx, "edit-apply")
	waitJS(t, ctx, "the new object's page", `location.hash === '`+widgetsRoute+`/default/from-ui' &&
		document.getElementById('object-yaml')?.textContent.includes('team: ui')`, 5*time.Second)
	code, spec, managers := widgetManagers(t, s, "from-ui")
	if code != http.StatusOK || spec["size"] != "small" || strings.Join(managers, ",") != "setpoint-ui/Apply" {
		t.Fatalf("after apply: GET %d, spec %v, managers %v; want 200, size small, setpoint-ui/Apply", code, spec, managers)
	}

	// An invalid edit: the Status message and its causes show inline.
	click(t, ctx, "object-edit")
	waitJS(t, ctx, "the editor with the object", `document.getElementById('edit-yaml')?.value.includes('size: small')`, 2*time.Second)
	text := evalJS[string](t, ctx, `document.getElementById('edit-yaml').value`)
	if strings.Contains(text, "resourceVersion") || strings.Contains(text, "managedFields") {
		t.Fatalf("the text to edit holds server-owned fields:\n%s", text)
	}
	setValue(t, ctx, "edit-yaml", strings.Replace(text, "size: small", "size: huge", 1))
	review(t, ctx)
	waitJS(t, ctx, "the validation error with its cause", `[...document.querySelectorAll('#edit-error .causes li')].some(li => li.textContent.startsWith('spec.size: ') && li.textContent.includes('huge'))`, 5*time.Second)
	t.Logf("invalid: %s", evalJS[string](t, ctx, `document.getElementById('edit-error').textContent`))
	if !evalJS[bool](t, ctx, `document.getElementById('edit-apply').disabled`) {
		t.Fatal("Apply is enabled after a refused review")
	}

	// A misspelt field is refused, not dropped (strict field validation).
	setValue(t, ctx, "edit-yaml", strings.Replace(text, "size: small", "size: small\n  colour: red", 1))
	review(t, ctx)
	waitJS(t, ctx, "the unknown field refused", `document.getElementById('edit-error').textContent.includes('colour')`, 2*time.Second)

	// A valid edit: the diff shows the changed line, then apply.
	setValue(t, ctx, "edit-yaml", strings.Replace(text, "size: small", "size: large", 1))
	review(t, ctx)
	waitJS(t, ctx, "the diff of the edit", `[...document.querySelectorAll('#edit-diff .del')].map(d => d.textContent).join('|') === '-   size: small' &&
		[...document.querySelectorAll('#edit-diff .add')].map(d => d.textContent).join('|') === '+   size: large'`, 5*time.Second)
	screenshot(t, ctx, "edit-diff.png")
	if _, spec, _ := widgetManagers(t, s, "from-ui"); spec["size"] != "small" {
		t.Fatalf("the review changed the object: size %v", spec["size"])
	}
	click(t, ctx, "edit-apply")
	waitJS(t, ctx, "the edit applied", `document.getElementById('object-yaml').textContent.includes('size: large') &&
		document.getElementById('edit-state').textContent.startsWith('Applied')`, 5*time.Second)

	// Copy YAML: to the clipboard, or the text is selected to copy by hand.
	click(t, ctx, "object-copy")
	waitJS(t, ctx, "copied", `['Copied.', 'Selected: press Ctrl+C to copy.'].includes(document.getElementById('object-copy-state').textContent)`, 2*time.Second)
	if got := evalJS[string](t, ctx, `document.getElementById('object-copy-state').textContent`); strings.HasPrefix(got, "Selected") {
		if sel := evalJS[string](t, ctx, `String(window.getSelection())`); !strings.Contains(sel, "size: large") {
			t.Fatalf("the copy fell back to a selection, which holds %q", sel)
		}
	}

	// Delete asks first, then deletes and returns to the table.
	click(t, ctx, "object-delete")
	waitJS(t, ctx, "the confirmation names the object", `!document.getElementById('delete-confirm').hidden &&
		document.getElementById('delete-confirm').textContent.includes('Delete Widget default/from-ui?')`, 2*time.Second)
	if code, _, _ := widgetManagers(t, s, "from-ui"); code != http.StatusOK {
		t.Fatalf("deleted before the confirmation: %d", code)
	}
	click(t, ctx, "delete-yes")
	waitJS(t, ctx, "back on the table without the object", `location.hash === '`+widgetsRoute+`' && `+rowJS("default/alpha")+` && !`+rowJS("default/from-ui"), 5*time.Second)
	if code, _, _ := widgetManagers(t, s, "from-ui"); code != http.StatusNotFound {
		t.Fatalf("after delete: GET %d, want 404", code)
	}

	// An object another manager wrote: changing its fields is a conflict
	// until the user forces it.
	evalJS[chromedp.Void](t, ctx, `location.hash = '`+widgetsRoute+`/default/alpha'`)
	waitJS(t, ctx, "alpha's page", `document.getElementById('object-yaml')?.textContent.includes('size: small')`, 5*time.Second)
	click(t, ctx, "object-edit")
	waitJS(t, ctx, "the editor with alpha", `document.getElementById('edit-yaml')?.value.includes('size: small')`, 2*time.Second)
	text = evalJS[string](t, ctx, `document.getElementById('edit-yaml').value`)
	setValue(t, ctx, "edit-yaml", strings.Replace(text, "size: small", "size: medium", 1))
	review(t, ctx)
	waitJS(t, ctx, "the conflict and the way out", `document.getElementById('edit-error').textContent.includes('Force conflicts')`, 2*time.Second)
	click(t, ctx, "edit-force")
	review(t, ctx)
	waitJS(t, ctx, "the forced diff", `[...document.querySelectorAll('#edit-diff .add')].map(d => d.textContent).join('|') === '+   size: medium'`, 2*time.Second)
	click(t, ctx, "edit-apply")
	waitJS(t, ctx, "the forced edit applied", `document.getElementById('object-yaml').textContent.includes('size: medium')`, 5*time.Second)
	if _, _, managers := widgetManagers(t, s, "alpha"); !strings.Contains(strings.Join(managers, ","), "setpoint-ui/Apply") {
		t.Fatalf("alpha's managers after the forced apply: %v", managers)
	}

	// A reader, bound by RBAC to get, list and watch widgets in default,
	// sees alpha but no write button: the buttons follow the user's
	// rights (the admin above had them all), not the verbs widgets serve.
	for _, args := range [][]string{
		{"create", "serviceaccount", "ui-reader"},
		{"create", "role", "widget-reader", "--verb=get,list,watch", "--resource=widgets.example.setpoint.dev"},
		{"create", "rolebinding", "ui-reader", "--role=widget-reader", "--serviceaccount=default:ui-reader"},
	} {
		if out, errOut, err := s.Kubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}
	token, errOut, err := s.Kubectl("create", "token", "ui-reader", "--duration", "10m")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, errOut)
	}
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("signin-token")),
		chromedp.SendKeys(chromedp.ID("signin-token"), strings.TrimSpace(token)),
		chromedp.SendKeys(chromedp.ID("signin-namespace"), "default"),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#kinds a[data-route="`+widgetsRoute+`"]`)),
	); err != nil {
		t.Fatalf("sign in as the reader: %v", err)
	}
	const checked = `['create-slot', 'edit-slot', 'delete-slot'].some(id => document.getElementById(id)) &&
		[...document.querySelectorAll('#create-slot, #edit-slot, #delete-slot')].every(e => e.dataset.access === 'checked')`
	const buttons = `['object-create', 'object-edit', 'object-delete'].filter(id => document.getElementById(id)).join(' ')`
	evalJS[chromedp.Void](t, ctx, `location.hash = '`+widgetsRoute+`'`)
	waitJS(t, ctx, "the reader's table and rights", rowJS("default/alpha")+` && `+checked, 10*time.Second)
	if got := evalJS[string](t, ctx, buttons); got != "" {
		t.Errorf("the reader sees %q on the table", got)
	}
	evalJS[chromedp.Void](t, ctx, `location.hash = '`+widgetsRoute+`/default/alpha'`)
	waitJS(t, ctx, "alpha's page and the reader's rights", `document.getElementById('object-yaml')?.textContent.includes('size: medium') && `+checked, 10*time.Second)
	if got := evalJS[string](t, ctx, buttons); got != "" {
		t.Errorf("the reader sees %q on alpha's page", got)
	}
}

var clockCRD = testsupport.CRD{Kind: "Clock", Scope: "Cluster", Columns: `[{"jsonPath":".spec.since","name":"Since","type":"date"}]`, Schema: `{"properties":{"spec":{"properties":{"since":{"format":"date-time","type":"string"}},"type":"object"}},"type":"object"}`}.String()

// TestBrowserPluginCountsAndClocks checks the plugin page's call and error
// counts, that a date printer column other than Age keeps ticking, and the
// legend of the children's badge.
func TestBrowserPluginCountsAndClocks(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t, testserver.Options{})
	w := wsSetupWidgets(t, s)
	w.create("alpha", "small", nil)
	if code, body, err := s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, strings.NewReader(clockCRD)); err != nil || code != http.StatusCreated {
		t.Fatalf("create the Clock CRD: %d %s %v", code, body, err)
	}
	since := time.Now().Add(-30 * time.Second).UTC().Format(time.RFC3339)
	testsupport.Poll(t, 10*time.Second, "a Clock created", func() (bool, string) {
		code, body, err := s.Do("POST", "/apis/example.setpoint.dev/v1/clocks", s.Token,
			strings.NewReader(`{"apiVersion":"example.setpoint.dev/v1","kind":"Clock","metadata":{"name":"g1"},"spec":{"since":"`+since+`"}}`))
		return err == nil && code == http.StatusCreated, fmt.Sprintf("%d %s %v", code, body, err)
	})
	w.call("POST", "/apis/setpoint.dev/v1alpha1/plugins", "application/json", map[string]any{
		"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin", "metadata": map[string]any{"name": "widget-logic"},
		"spec": map[string]any{"module": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)}},
	})
	ctx := browser(t, s)
	uiOpen(t, ctx, s, "#/k/example.setpoint.dev/v1/clocks")

	// The Since column is a date: it ticks like Age.
	cell := cellJS("g1", "Since")
	waitJS(t, ctx, "the table", rowJS("g1"), 10*time.Second)
	waitJS(t, ctx, "the Since column", `/^\d+s$/.test(`+cell+` || '')`, 10*time.Second)
	first := evalJS[string](t, ctx, cell)
	waitJS(t, ctx, "the Since column ticks", cell+` !== `+strconv.Quote(first)+` && /^\d+s$/.test(`+cell+`)`, 3*time.Second)
	if n, _ := strconv.Atoi(strings.TrimSuffix(first, "s")); n < 29 || n > 60 {
		t.Fatalf("Since shows %q for a time 30s ago", first)
	}

	// The badge legend on an object page.
	evalJS[chromedp.Void](t, ctx, `location.hash = '`+widgetsRoute+`/default/alpha'`)
	waitJS(t, ctx, "the legend", `(document.getElementById('children-legend') || {}).textContent?.includes('no Ready condition')`, 5*time.Second)

	// The plugin page: the counts the server keeps in the Plugin's status,
	// live, next to its log.
	evalJS[chromedp.Void](t, ctx, `location.hash = '#/k/setpoint.dev/v1alpha1/plugins/_/widget-logic'`)
	waitJS(t, ctx, "the plugin's counts in its log card", `document.querySelector('#plugin-log')?.parentElement.querySelector('#plugin-calls')?.textContent === '0' &&
		document.getElementById('plugin-errors')?.textContent === '0' && document.getElementById('plugin-log')`, 5*time.Second)
	w.call("PATCH", "/apis/setpoint.dev/v1alpha1/plugins/widget-logic/status", "application/merge-patch+json",
		map[string]any{"status": map[string]any{"calls": 7, "errors": 2, "lastError": "reconcile: wasm trap: unreachable"}})
	waitJS(t, ctx, "the new counts", `document.getElementById('plugin-calls').textContent === '7' &&
		document.getElementById('plugin-errors').textContent === '2' &&
		document.getElementById('plugin-last-error').textContent.includes('wasm trap: unreachable')`, 5*time.Second)
	screenshot(t, ctx, "plugin-counts.png")
}
