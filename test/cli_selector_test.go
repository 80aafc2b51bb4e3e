package test

import (
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestCLISelectorErrors: a selector is part of the command line, so one the
// client cannot parse, or one the server refuses (a field the kind does not
// index), exits 2 like any bad argument, not 6 (an invalid manifest or a
// rejected object); a good one still selects.
func TestCLISelectorErrors(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := writeFiles(t, map[string]string{
		"crd.yaml": widgetCRD,
		"w.yaml":   "apiVersion: example.setpoint.dev/v1\nkind: Widget\nmetadata: {name: sel, labels: {env: dev}}\nspec: {name: Sel, size: small}\n",
	})
	ok(t, s, "apply", "-f", filepath.Join(dir, "crd.yaml"), "-f", filepath.Join(dir, "w.yaml"))
	if out := ok(t, s, "get", "wd", "-l", "env in (dev,prod)", "-o", "name"); out != "widget.example.setpoint.dev/sel\n" {
		t.Errorf("get -l 'env in (dev,prod)': %q", out)
	}
	fails(t, s, nil, "", 2, []string{`invalid label selector "bad key="`}, "get", "wd", "-l", "bad key=")
	fails(t, s, nil, "", 2, []string{`invalid field selector "bad"`}, "get", "wd", "--field-selector", "bad")
	fails(t, s, nil, "", 2, []string{"spec.size"}, "get", "wd", "--field-selector", "spec.size=small")
	fails(t, s, nil, "", 2, []string{"spec.size"}, "get", "wd", "-o", "yaml", "--field-selector", "spec.size=small")
	fails(t, s, nil, "", 2, []string{`invalid label selector "bad key="`}, "delete", "wd", "-l", "bad key=")
	ok(t, s, "get", "wd", "sel") // nothing was deleted
}
