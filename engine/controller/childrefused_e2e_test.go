package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

var (
	dials    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "dials"}
	dialKind = controller.Kind{Resource: dials, Kind: "Dial", Namespaced: true}
)

// dialCRD is a child kind whose spec the server checks: level is at most 10.
const dialCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: dials.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: dials, singular: dial, kind: Dial}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              level: {type: integer, maximum: 10}
`

// dialPlugin asks for one Dial per Gauge with the Gauge's spec.level, and
// counts the failures the controller records against it.
type dialPlugin struct{ levelPlugin }

func (p *dialPlugin) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Children: []abi.RawJSON{abi.RawJSON(fmt.Sprintf(
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Dial","metadata":{"name":%q},"spec":{"level":%d}}`,
		req.Object.String("metadata", "name")+"-dial", req.Object.Int("spec", "level")))}}, nil
}

// A child write the server refuses (here, against the child CRD's schema)
// shows on the parent as Ready=False with the server's message, in a
// Warning event, and in the plugin's failure count, as a refused status
// does; a valid child later clears it.
func TestChildRefusedShowsOnObject(t *testing.T) {
	svc := newEngine(t)
	for _, m := range []string{gaugeCRD, dialCRD} {
		var crd map[string]any
		if err := yaml.Unmarshal([]byte(m), &crd); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(context.Background(), kinds.CRDResource, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "gauges and dials served", func() bool {
		_, g := svc.Resource(gauges)
		_, d := svc.Resource(dials)
		return g && d
	})
	p := &dialPlugin{}
	_, stop := runManager(t, newController(t, svc, "gauge", p, func(o *controller.Options) {
		o.For, o.Owns = gaugeKind, []controller.Kind{dialKind}
	}))
	defer stop()
	create(t, svc, gauges, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Gauge",
		"metadata": map[string]any{"name": "g1", "namespace": "default"},
		"spec":     map[string]any{"level": int64(99)},
	}})
	var st, reason, msg string
	eventually(t, 10*time.Second, "Ready=False on g1", func() bool {
		st, reason, msg = ready(get(t, svc, gauges, "g1"))
		return st == "False"
	})
	// Invalid content is terminal: the same output meets the same answer
	// until the object or the plugin changes.
	if reason != controller.ReasonTerminalError || !strings.Contains(msg, "spec.level") || !strings.Contains(msg, "less than or equal to 10") {
		t.Errorf("Ready = False %s %q, want TerminalError with the server's message about spec.level", reason, msg)
	}
	if _, err := svc.Get(context.Background(), dials, "default", "g1-dial", metav1.GetOptions{}); err == nil {
		t.Errorf("the refused child was stored")
	}
	eventually(t, 5*time.Second, "a Warning event", func() bool {
		for _, e := range events(t, svc, controller.ReasonTerminalError) {
			if e.Object["type"] == "Warning" && strings.Contains(e.Object["message"].(string), "spec.level") {
				return true
			}
		}
		return false
	})
	if f := p.failed(); len(f) == 0 || !strings.Contains(f[0].Error(), "spec.level") {
		t.Errorf("failures recorded = %v, want the refused child", f)
	}

	cur := get(t, svc, gauges, "g1")
	_ = unstructured.SetNestedField(cur.Object, int64(7), "spec", "level")
	if _, err := svc.Update(context.Background(), gauges, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Ready=True and the child after a valid spec", func() bool {
		st, _, _ := ready(get(t, svc, gauges, "g1"))
		_, err := svc.Get(context.Background(), dials, "default", "g1-dial", metav1.GetOptions{})
		return st == "True" && err == nil
	})
}
