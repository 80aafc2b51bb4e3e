package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// sameJSON fails unless body is the JSON of obj (keys in any order).
func sameJSON(t *testing.T, what string, body []byte, obj *unstructured.Unstructured) {
	t.Helper()
	if body == nil {
		t.Fatalf("%s: no JSON", what)
	}
	var got, want map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v: %s", what, err, body)
	}
	b, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-object +JSON):\n%s", what, diff)
	}
}

func TestWriteJSONIsTheObject(t *testing.T) {
	ctx := context.Background()
	s := newService(t)

	in := widget("w1", "small", map[string]string{"a": "b"})
	in.SetAnnotations(map[string]string{"note": `"resourceVersion" in a value`})
	created, body, err := s.CreateJSON(ctx, widgets, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetResourceVersion() == "" {
		t.Fatal("no resourceVersion")
	}
	sameJSON(t, "create", body, created)
	got, err := s.Get(ctx, widgets, "default", "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "create against get", body, got)

	if _, body, err := s.CreateJSON(ctx, widgets, widget("w2", "small", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil || body != nil {
		t.Errorf("dry-run create: JSON %s, err %v; want none", body, err)
	}

	upd := got.DeepCopy()
	upd.SetLabels(map[string]string{"a": "c"})
	updated, body, err := s.UpdateJSON(ctx, widgets, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetResourceVersion() == got.GetResourceVersion() {
		t.Fatal("resourceVersion unchanged by an update")
	}
	sameJSON(t, "update", body, updated)

	// Nothing written: no JSON, the caller encodes the object.
	if _, body, err := s.UpdateJSON(ctx, widgets, updated, metav1.UpdateOptions{}); err != nil || body != nil {
		t.Errorf("no-op update: JSON %s, err %v; want none", body, err)
	}

	st := updated.DeepCopy()
	if err := unstructured.SetNestedField(st.Object, "Ready", "status", "state"); err != nil {
		t.Fatal(err)
	}
	stOut, body, err := s.UpdateStatusJSON(ctx, widgets, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "status update", body, stOut)
	if v, _, _ := unstructured.NestedString(stOut.Object, "status", "state"); v != "Ready" {
		t.Errorf("status.state %q after a status update", v)
	}
}

func TestCreateInTerminatingOrMissingNamespace(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("doomed")
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := widget("w", "small", nil)
	w.SetNamespace("doomed")
	if _, err := s.Create(ctx, widgets, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in an active namespace: %v", err)
	}
	if err := s.Delete(ctx, kinds.NamespaceResource, "", "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, kinds.NamespaceResource, "", "doomed", metav1.GetOptions{})
	if err != nil || got.GetDeletionTimestamp() == nil {
		t.Fatalf("namespace after delete: %v, %v; want it terminating", got, err)
	}
	w2 := widget("w2", "small", nil)
	w2.SetNamespace("doomed")
	_, err = s.Create(ctx, widgets, w2, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "because it is being terminated") {
		t.Errorf("create in a terminating namespace: %v, want Forbidden", err)
	}
	w3 := widget("w3", "small", nil)
	w3.SetNamespace("missing")
	if _, err := s.Create(ctx, widgets, w3, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: %v, want NotFound", err)
	}
}

func TestTerminating(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want bool
	}{
		{"active", `{"apiVersion":"v1","kind":"Namespace","metadata":{"creationTimestamp":"2026-11-21T06:00:00Z","name":"a"}}`, false},
		{"terminating", `{"apiVersion":"v1","kind":"Namespace","metadata":{"deletionTimestamp":"2026-11-21T06:00:00Z","name":"a"}}`, true},
		{"key only in an annotation", `{"metadata":{"annotations":{"deletionTimestamp":"x"},"name":"a"}}`, false},
		{"quoted in a value", `{"metadata":{"annotations":{"a":"\"deletionTimestamp\""},"name":"a"}}`, false},
		{"not JSON", `{"deletionTimestamp"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := terminating([]byte(tc.doc)); got != tc.want {
				t.Errorf("terminating(%s) = %v, want %v", tc.doc, got, tc.want)
			}
		})
	}
}
