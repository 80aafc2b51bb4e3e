package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// BenchmarkCreateBuiltin measures the engine's part of creates of built-in
// objects, written to the store (with an admitter installed that changes
// nothing, as setpoint server has): a Role of 8 rules (its unknown fields
// looked for by a walk of its API's schema) and an Event as a controller
// records one, sent as a request body (decoded into corev1.Event and
// encoded again) and built in the stored shape (kinds.WithBuiltShape), and
// a Widget as the custom resource baseline.
func BenchmarkCreateBuiltin(b *testing.B) {
	var rules []any
	for i := range 8 {
		rules = append(rules, map[string]any{"apiGroups": []any{""}, "resources": []any{"pods", fmt.Sprintf("pods%d", i)}, "verbs": []any{"get", "list", "watch"}})
	}
	event := kindstest.FromYAML(b, `{apiVersion: v1, kind: Event, metadata: {namespace: default},
		involvedObject: {apiVersion: example.setpoint.dev/v1, kind: Widget, namespace: default, name: w, uid: 6c1f0f8e-5b1a-4d7e-9a51-0c3f3d0f2a11},
		reason: Reconciled, message: widget reconciled, type: Normal, source: {component: setpoint}, count: 1,
		firstTimestamp: "2026-01-01T00:00:00Z", lastTimestamp: "2026-01-01T00:00:00Z"}`)
	type bench struct {
		name string
		gvr  schema.GroupVersionResource
		obj  func(name string) *unstructured.Unstructured
		// built writes with kinds.WithBuiltShape, as the controllers
		// write their Events.
		built bool
	}
	role := bench{"Role", kinds.RoleResource, func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "rules": rules}}
		u = u.DeepCopy()
		u.SetName(name)
		u.SetNamespace("default")
		return u
	}, false}
	ev := bench{"Event", kinds.EventResource, func(name string) *unstructured.Unstructured {
		u := event.DeepCopy()
		u.SetName(name)
		return u
	}, false}
	run := func(bc bench) {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if bc.built {
				ctx = kinds.WithBuiltShape(ctx)
			}
			s := newService(b)
			s.setAdmitter(AdmitterFuncs{})
			// The first write of a Role parses the built-in kinds'
			// schema, once: not timed.
			if _, err := s.Create(ctx, bc.gvr, bc.obj("warm-up"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b)()
			for i := range b.N {
				if _, err := s.Create(ctx, bc.gvr, bc.obj(fmt.Sprintf("o%d", i)), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run(bench{"Widget", widgets, func(name string) *unstructured.Unstructured { return widget(name, "small", nil) }, false})
	run(role)
	run(ev)
	built := ev
	built.name, built.built = "Event/built", true
	run(built)
}
