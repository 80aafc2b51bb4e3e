package main

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSpecDiff(t *testing.T) {
	base := map[string]any{
		"module":    map[string]any{"digest": "sha256:aa"},
		"reconcile": map[string]any{"for": "widgets.example.setpoint.dev", "owns": []any{"b.x", "a.x"}},
		"admission": []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating"}},
		"limits":    map[string]any{"callTimeout": "500ms"},
	}
	same := map[string]any{
		"module":      map[string]any{"digest": "sha256:aa"},
		"reconcile":   map[string]any{"for": "widgets.example.setpoint.dev", "owns": []any{"a.x", "b.x"}},
		"admission":   []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating", "failurePolicy": "Fail", "operations": []any{"update", "CREATE", "DELETE"}}},
		"limits":      map[string]any{"callTimeout": "0.5s"},
		"config":      map[string]any{},
		"permissions": map[string]any{"read": []any{}},
	}
	if d, err := specDiff(base, same); err != nil || len(d) != 0 {
		t.Errorf("the same spec spelled otherwise differs in %v (%v)", d, err)
	}
	other := map[string]any{
		"module":     map[string]any{"digest": "sha256:bb"},
		"reconcile":  map[string]any{"for": "widgets.example.setpoint.dev", "owns": []any{"a.x"}},
		"admission":  []any{map[string]any{"resources": []any{"widgets.example.setpoint.dev"}, "type": "Validating", "failurePolicy": "Ignore"}},
		"limits":     map[string]any{"callTimeout": "500ms"},
		"config":     map[string]any{"k": "v"},
		"privileged": true,
	}
	d, err := specDiff(base, other)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"module", "reconcile", "admission", "config", "privileged"}; !slices.Equal(d, want) {
		t.Errorf("diff %v, want %v", d, want)
	}
}

func TestReleaseCommand(t *testing.T) {
	obj := unstructured.Unstructured{Object: map[string]any{}}
	obj.SetName("demo")
	obj.SetNamespace("default")
	obj.SetFinalizers([]string{"example.setpoint.dev/hold", "setpoint.dev/widget"})
	got := releaseCommand("widgets.example.setpoint.dev", obj, "setpoint.dev/widget")
	want := `kubectl patch widgets.example.setpoint.dev demo -n default --type=json -p '[{"op":"test","path":"/metadata/finalizers/1","value":"setpoint.dev/widget"},{"op":"remove","path":"/metadata/finalizers/1"}]'`
	if got != want {
		t.Errorf("release command\n got %s\nwant %s", got, want)
	}
}
