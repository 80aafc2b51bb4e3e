package plugins

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// privilegePlugin reconciles Notes with the given extra spec fields.
func privilegePlugin(name, digest string, extra map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"module":    map[string]any{"digest": digest},
		"reconcile": map[string]any{"for": "notes.example.setpoint.dev"},
	}
	for k, v := range extra {
		spec[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// No plugin writes what can grant privileges (Plugins here) unless an
// administrator set spec.privileged: a spec that names such a resource in
// owns, permissions.write, reconcile.for or a mutating rule is refused, and
// a host-call write under permissions.write "*" is forbidden.
func TestPluginPrivileges(t *testing.T) {
	e := newUpgradeEnv(t)
	ctx := context.Background()
	digest := e.put(t, "exports:reconcile,admit;v1")
	pluginOf := func(name string) map[string]any {
		obj, err := e.svc.Get(ctx, Resource, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := unstructured.NestedMap(obj.Object, "status")
		return st
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		says  string
	}{
		{"owns", map[string]any{"reconcile": map[string]any{"for": "notes.example.setpoint.dev", "owns": []any{"plugins.setpoint.dev"}}}, "spec.reconcile.owns names plugins.setpoint.dev"},
		{"write", map[string]any{"permissions": map[string]any{"write": []any{"customresourcedefinitions.apiextensions.k8s.io"}}}, "spec.permissions.write names customresourcedefinitions.apiextensions.k8s.io"},
		{"for", map[string]any{"reconcile": map[string]any{"for": "plugins.setpoint.dev"}}, "spec.reconcile.for names plugins.setpoint.dev"},
		{"mutating", map[string]any{"admission": []any{map[string]any{"resources": []any{"plugins.setpoint.dev"}, "type": "Mutating"}}}, "spec.admission (Mutating) names plugins.setpoint.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "refused-" + tc.name
			if _, err := e.svc.Create(ctx, Resource, privilegePlugin(name, digest, tc.extra), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			testsupport.Poll(t, 10*time.Second, "the spec refused", func() (bool, string) {
				st := pluginOf(name)
				return st["phase"] == PhaseFailed && conditionReason(st, ConditionLoaded) == ReasonInvalidSpec, fmt.Sprint(st)
			})
			if msg := conditionMessage(pluginOf(name), ConditionLoaded); !strings.Contains(msg, tc.says) || !strings.Contains(msg, "spec.privileged: true") {
				t.Errorf("Loaded message %q lacks %q and the way to allow it", msg, tc.says)
			}
		})
	}

	escalation := func(name string) abi.WriteRequest {
		b, _ := privilegePlugin(name, digest, map[string]any{"permissions": map[string]any{"write": []any{"*"}, "read": []any{"*"}}}).MarshalJSON()
		return abi.WriteRequest{Object: b}
	}
	objects := NewObjects(e.svc, quietLogger())
	for _, tc := range []struct {
		name       string
		privileged bool
	}{{"everything", false}, {"admin", true}} {
		extra := map[string]any{"permissions": map[string]any{"write": []any{"*"}}}
		if tc.privileged {
			// Its own kind: two Plugins reconciling notes would leave the
			// one created later (or, in the same second, named later)
			// waiting for the other's binding.
			extra["privileged"] = true
			extra["reconcile"] = map[string]any{"for": "gizmos.example.setpoint.dev"}
		}
		if _, err := e.svc.Create(ctx, Resource, privilegePlugin(tc.name, digest, extra), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testsupport.Poll(t, 10*time.Second, tc.name+" loaded", func() (bool, string) {
			st := pluginOf(tc.name)
			return st["phase"] == PhaseLoaded, fmt.Sprint(st)
		})
		resp := objects.WriteObject(ctx, tc.name, abi.HostCreate, escalation(tc.name+"-child"))
		switch {
		case tc.privileged && resp.Error != "":
			t.Errorf("a privileged plugin's write of a Plugin: %+v", resp)
		case !tc.privileged && (resp.Code != http.StatusForbidden || !strings.Contains(resp.Error, `plugin "everything" may not write plugins.setpoint.dev`)):
			t.Errorf("a plugin with write \"*\" created a Plugin: %+v, want 403", resp)
		}
	}
}
