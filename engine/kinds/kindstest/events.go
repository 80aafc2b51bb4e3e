package kindstest

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// CheckBuiltEvent fails t unless ev, built in code, is in the shape the
// Event kind stores: outside apiVersion, kind and metadata, corev1.Event's
// encoding with no unknown field, so that decoding it into corev1.Event
// and encoding it again gives it back unchanged. what names the case.
func CheckBuiltEvent(t testing.TB, ev *unstructured.Unstructured, what string) {
	t.Helper()
	body := map[string]any{}
	for k, v := range ev.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			body[k] = v
		}
	}
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var typed corev1.Event
	strict, err := kjson.UnmarshalStrict(data, &typed, kjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 {
		t.Fatalf("%s: the Event does not decode strictly: %v %v", what, err, strict)
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&typed)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVersion", "kind", "metadata"} {
		delete(want, k)
	}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("%s: built\n%v\nwant corev1.Event's encoding\n%v", what, body, want)
	}
}
