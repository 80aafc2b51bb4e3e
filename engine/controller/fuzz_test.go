package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// FuzzPluginOutput feeds arbitrary plugin output — desired children and a
// status — through what the engine does with it: decoding, planning the
// child writes against an observed child, and computing the status. None of
// it may panic, a refused child must be ErrInvalidChild, and every planned
// object must survive a deep copy (only JSON types inside).
func FuzzPluginOutput(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"size":"small"}}`), []byte(`{"state":"ok"}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"b"}},"data":{"n":1.5}}`), []byte(`{"conditions":"nope"}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5}}`), []byte(`[]`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret"}`), []byte(`null`))
	f.Add([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"other"}}`), []byte(`{"conditions":[{"type":"Ready","status":3}]}`))
	owns := map[schema.GroupKind]Kind{{Kind: "ConfigMap"}: cmKind}
	f.Fuzz(func(t *testing.T, child, status []byte) {
		observed := []*unstructured.Unstructured{ownedCM("c", map[string]any{"size": "small"})}
		var desired []*unstructured.Unstructured
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(child); err == nil {
			desired = append(desired, u)
		}
		actions, err := planChildren(widget(), true, owns, observed, desired)
		if err != nil && !errors.Is(err, ErrInvalidChild) {
			t.Fatalf("planChildren: %v is not ErrInvalidChild", err)
		}
		for _, a := range actions {
			a.obj.DeepCopy()
		}
		var fromPlugin map[string]any
		if len(status) > 0 && abi.RawJSON(status).Valid() {
			_ = utiljson.Unmarshal(status, &fromPlugin)
		}
		out := desiredStatus(map[string]any{"observedGeneration": int64(1)}, fromPlugin, 2, readyCondition{status: "True", reason: ReasonReconciled, message: "ok"}, time.Unix(0, 0))
		(&unstructured.Unstructured{Object: map[string]any{"status": out}}).DeepCopy()
		if c, ok := readyOf(out); !ok || c["status"] != "True" {
			t.Fatalf("Ready condition missing from %v", out)
		}
	})
}
