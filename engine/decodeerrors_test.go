package engine

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// TestBuiltinMistypedWrites writes a ConfigMap whose data holds a number
// through each write path and checks kube-apiserver v1.34's answer: the
// decoder's 400 for a create and an update (one of a missing object too,
// as kube-apiserver decodes before it reads the store), 422 on the field
// "patch" for each patch type (the strategic merge patch's from the
// unstructured converter), and the field manager's refusal for an apply.
func TestBuiltinMistypedWrites(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	const decodeErr = `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`
	cm := func(name, data string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":` + data + `}`
	}
	if _, err := s.Create(ctx, kinds.ConfigMapResource, kindstest.FromYAML(t, cm("good", `{"a":"1"}`)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore} {
		_, err := s.Create(ctx, kinds.ConfigMapResource, kindstest.FromYAML(t, cm("bad", `{"a":1}`)), metav1.CreateOptions{FieldValidation: mode})
		if !apierrors.IsBadRequest(err) || err.Error() != decodeErr {
			t.Errorf("%s create = %v, want BadRequest %q", mode, err, decodeErr)
		}
	}
	for _, name := range []string{"good", "missing"} {
		_, err := s.Update(ctx, kinds.ConfigMapResource, kindstest.FromYAML(t, cm(name, `{"a":1}`)), metav1.UpdateOptions{})
		if !apierrors.IsBadRequest(err) || err.Error() != decodeErr {
			t.Errorf("update of %s = %v, want BadRequest %q", name, err, decodeErr)
		}
	}
	// An unknown field in an update of a missing object is refused by
	// Strict before the object is found missing.
	_, err := s.Update(ctx, kinds.ConfigMapResource, kindstest.FromYAML(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"missing","namespace":"default"},"typo":1}`),
		metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
	if want := `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "typo"`; !apierrors.IsBadRequest(err) || err.Error() != want {
		t.Errorf("strict update of a missing object = %v, want %q", err, want)
	}
	patches := []struct {
		pt           types.PatchType
		body, detail string
	}{
		{types.MergePatchType, `{"data":{"a":1}}`, `json: cannot unmarshal number into Go struct field ConfigMap.data of type string`},
		{types.JSONPatchType, `[{"op":"add","path":"/data/b","value":2}]`, `json: cannot unmarshal number into Go struct field ConfigMap.data of type string`},
		{types.StrategicMergePatchType, `{"data":{"a":1}}`, `patch: Invalid value: "map[data:map[a:1]]": cannot convert int64 to string`},
	}
	for _, p := range patches {
		_, err := s.Patch(ctx, kinds.ConfigMapResource, "default", "good", p.pt, []byte(p.body), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.HasPrefix(err.Error(), ` "" is invalid: patch: Invalid value: `) || !strings.HasSuffix(err.Error(), p.detail) {
			t.Errorf("%s = %v, want Invalid patch ending %q", p.pt, err, p.detail)
		}
	}
	// Metadata that does not decode is the object's decoding error, for
	// a custom resource too.
	_, err = s.Create(ctx, widgets, kindstest.FromYAML(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","labels":"x"}}`), metav1.CreateOptions{})
	if want := `Widget in version "v1" cannot be handled as a Widget: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string`; !apierrors.IsBadRequest(err) || err.Error() != want {
		t.Errorf("create of a Widget with labels \"x\" = %v, want %q", err, want)
	}
	_, _, err = s.Apply(ctx, kinds.ConfigMapResource, "default", "good", []byte(cm("good", `{"a":1}`)), metav1.PatchOptions{FieldManager: "m"})
	if want := `failed to create typed patch object (default/good; /v1, Kind=ConfigMap): .data.a: expected string, got &value.valueUnstructured{Value:1}`; err == nil || err.Error() != want {
		t.Errorf("apply = %v, want %q", err, want)
	}
}
