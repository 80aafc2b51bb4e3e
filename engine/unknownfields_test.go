package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// TestBuiltinNestedUnknownFields writes a Role whose rule has a misspelt
// field (verb for verbs) through each write path: Strict refuses it with
// kube-apiserver's text, Warn stores the Role without it and warns, Ignore
// stores it without it silently. Server-side apply refuses it whatever
// the mode, as kube-apiserver's field manager does.
func TestBuiltinNestedUnknownFields(t *testing.T) {
	s := newService(t)
	const typo = `unknown field "rules[0].verb"`
	const strictErr = `Role in version "v1" cannot be handled as a Role: strict decoding error: ` + typo
	rules := `[{"verb":["get"],"verbs":["list"],"resources":["pods"],"apiGroups":[""]}]`
	wantRules := []any{map[string]any{"verbs": []any{"list"}, "resources": []any{"pods"}, "apiGroups": []any{""}}}
	role := func(name string) *unstructured.Unstructured {
		return kindstest.FromYAML(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"`+name+`","namespace":"default"},"rules":`+rules+`}`)
	}
	base := func(name string) {
		t.Helper()
		u := kindstest.FromYAML(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"`+name+`","namespace":"default"}}`)
		if _, err := s.Create(context.Background(), kinds.RoleResource, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writes := []struct {
		name  string
		write func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error)
	}{
		{"create", func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error) {
			return s.Create(ctx, kinds.RoleResource, role(name), metav1.CreateOptions{FieldValidation: mode})
		}},
		{"update", func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error) {
			base(name)
			return s.Update(ctx, kinds.RoleResource, role(name), metav1.UpdateOptions{FieldValidation: mode})
		}},
		{"merge patch", func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error) {
			base(name)
			return s.Patch(ctx, kinds.RoleResource, "default", name, types.MergePatchType, []byte(`{"rules":`+rules+`}`), metav1.PatchOptions{FieldValidation: mode})
		}},
		{"JSON patch", func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error) {
			base(name)
			return s.Patch(ctx, kinds.RoleResource, "default", name, types.JSONPatchType, []byte(`[{"op":"add","path":"/rules","value":`+rules+`}]`), metav1.PatchOptions{FieldValidation: mode})
		}},
		{"strategic merge patch", func(ctx context.Context, name, mode string) (*unstructured.Unstructured, error) {
			base(name)
			return s.Patch(ctx, kinds.RoleResource, "default", name, types.StrategicMergePatchType, []byte(`{"rules":`+rules+`}`), metav1.PatchOptions{FieldValidation: mode})
		}},
	}
	for _, w := range writes {
		for _, mode := range []string{metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore} {
			t.Run(w.name+"/"+mode, func(t *testing.T) {
				var got warnings
				ctx := warning.WithWarningRecorder(context.Background(), &got)
				name := strings.ToLower(strings.ReplaceAll(w.name+"-"+mode, " ", "-"))
				out, err := w.write(ctx, name, mode)
				if mode == metav1.FieldValidationStrict {
					if err == nil || err.Error() != strictErr {
						t.Fatalf("error = %v, want %q", err, strictErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var want warnings
				if mode == metav1.FieldValidationWarn {
					want = warnings{typo}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
				stored, err := s.Get(context.Background(), kinds.RoleResource, "default", name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for what, o := range map[string]*unstructured.Unstructured{"answered": out, "stored": stored} {
					if diff := cmp.Diff(wantRules, o.Object["rules"]); diff != "" {
						t.Errorf("%s rules (-want +got):\n%s", what, diff)
					}
				}
			})
		}
	}
	// Unknown fields are found before validation: a rule left without
	// verbs is refused for its unknown field under Strict, and under Warn
	// warned of before validation refuses it.
	t.Run("before validation", func(t *testing.T) {
		onlyTypo := kindstest.FromYAML(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"invalid","namespace":"default"},"rules":[{"verb":["get"],"resources":["pods"],"apiGroups":[""]}]}`)
		if _, err := s.Create(context.Background(), kinds.RoleResource, onlyTypo.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err == nil || err.Error() != strictErr {
			t.Errorf("strict create = %v, want %q", err, strictErr)
		}
		var got warnings
		ctx := warning.WithWarningRecorder(context.Background(), &got)
		_, err := s.Create(ctx, kinds.RoleResource, onlyTypo.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationWarn})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rules[0].verbs: Required value") {
			t.Errorf("warned create = %v, want Invalid for the missing verbs", err)
		}
		if diff := cmp.Diff(warnings{typo}, got); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})
	t.Run("apply", func(t *testing.T) {
		for _, mode := range []string{metav1.FieldValidationStrict, metav1.FieldValidationIgnore} {
			body := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"applied","namespace":"default"},"rules":` + rules + `}`
			_, _, err := s.Apply(context.Background(), kinds.RoleResource, "default", "applied", []byte(body),
				metav1.PatchOptions{FieldManager: "m", FieldValidation: mode})
			if err == nil || !strings.Contains(err.Error(), ".rules[0].verb: field not declared in schema") {
				t.Errorf("%s apply = %v, want the field manager's refusal", mode, err)
			}
		}
	})
}
