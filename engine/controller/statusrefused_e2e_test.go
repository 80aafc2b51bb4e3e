package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

var (
	gauges    = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gauges"}
	gaugeKind = controller.Kind{Resource: gauges, Kind: "Gauge", Namespaced: true}
)

// gaugeCRD declares a status the server checks: level is an integer of at
// most 10.
const gaugeCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gauges.example.setpoint.dev}
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: gauges, singular: gauge, kind: Gauge}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              level: {type: integer}
          status:
            type: object
            properties:
              level: {type: integer, maximum: 10}
              observedGeneration: {type: integer}
              conditions:
                type: array
                items: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// levelPlugin reports spec.level as status.level, and counts the failures
// the controller records against it.
type levelPlugin struct {
	mu       sync.Mutex
	failures []error
}

func (p *levelPlugin) Reconcile(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Status: abi.RawJSON(fmt.Sprintf(`{"level":%d}`, req.Object.Int("spec", "level")))}, nil
}

func (p *levelPlugin) RecordFailure(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, err)
}

func (p *levelPlugin) failed() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.failures...)
}

// A status the server refuses (here, against the CRD's schema) shows on the
// object as Ready=False with the server's message, in a Warning event, and
// in the plugin's failure count; a valid status later clears it.
func TestStatusRefusedShowsOnObject(t *testing.T) {
	svc := newEngine(t)
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(gaugeCRD), &crd); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(context.Background(), kinds.CRDResource, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "gauges served", func() bool { _, ok := svc.Resource(gauges); return ok })
	p := &levelPlugin{}
	_, stop := runManager(t, newController(t, svc, "gauge", p, func(o *controller.Options) {
		o.For, o.Owns = gaugeKind, nil
	}))
	defer stop()
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.setpoint.dev/v1", "kind": "Gauge",
		"metadata": map[string]any{"name": "g1", "namespace": "default"},
		"spec":     map[string]any{"level": int64(99)},
	}}
	create(t, svc, gauges, g)
	var msg, reason string
	eventually(t, 10*time.Second, "Ready=False on g1", func() bool {
		var st string
		st, reason, msg = ready(get(t, svc, gauges, "g1"))
		return st == "False"
	})
	if reason != controller.ReasonTerminalError || !strings.Contains(msg, "refused the plugin's status") || !strings.Contains(msg, "status.level") {
		t.Errorf("Ready = False %s %q, want TerminalError naming the refusal and status.level", reason, msg)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(get(t, svc, gauges, "g1").Object, "status", "level"); found {
		t.Errorf("the refused status.level was stored")
	}
	eventually(t, 5*time.Second, "a Warning event", func() bool {
		for _, e := range events(t, svc, controller.ReasonTerminalError) {
			if e.Object["type"] == "Warning" && strings.Contains(e.Object["message"].(string), "status.level") {
				return true
			}
		}
		return false
	})
	if f := p.failed(); len(f) == 0 || !strings.Contains(f[0].Error(), "status refused") {
		t.Errorf("failures recorded = %v, want the refusal", f)
	}

	updateGauge := func(level int64) {
		cur := get(t, svc, gauges, "g1")
		_ = unstructured.SetNestedField(cur.Object, level, "spec", "level")
		if _, err := svc.Update(context.Background(), gauges, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updateGauge(7)
	eventually(t, 10*time.Second, "Ready=True after a valid status", func() bool {
		obj := get(t, svc, gauges, "g1")
		lvl, _, _ := unstructured.NestedInt64(obj.Object, "status", "level")
		st, _, _ := ready(obj)
		return st == "True" && lvl == 7
	})
}

// A status refused as forbidden is not terminal: the object says why
// (StatusRefused, a Warning event) and the reconcile is retried, and
// succeeds once the server accepts it.
func TestStatusForbiddenIsRetried(t *testing.T) {
	svc := newEngine(t)
	c := instrument(svc)
	var refusals atomic.Int64
	c.setFail(func(verb string, gvr schema.GroupVersionResource, name string) error {
		// The plugin's status write, and only the first one, is refused;
		// the controller's next write (Ready=False) passes.
		if verb == "updateStatus" && name == "w1" && refusals.Add(1) == 1 {
			return apierrors.NewForbidden(widgets.GroupResource(), name, errors.New("status writes are paused"))
		}
		return nil
	})
	p := &levelPlugin{}
	_, stop := runManager(t, newController(t, c, "widget", p, func(o *controller.Options) { o.Owns = nil }))
	defer stop()
	create(t, svc, widgets, newWidget("w1", "small"))
	eventually(t, 10*time.Second, "a StatusRefused Warning event", func() bool {
		for _, e := range events(t, svc, controller.ReasonStatusRefused) {
			if e.Object["type"] == "Warning" && strings.Contains(e.Object["message"].(string), "status writes are paused") {
				return true
			}
		}
		return false
	})
	eventually(t, 10*time.Second, "Ready=True once the status is accepted", func() bool {
		st, _, _ := ready(get(t, svc, widgets, "w1"))
		return st == "True"
	})
	if f := p.failed(); len(f) != 1 || !strings.Contains(f[0].Error(), "forbidden") {
		t.Errorf("failures recorded = %v, want the one refusal", f)
	}
}
