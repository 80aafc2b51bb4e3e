package controller

import (
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BenchmarkPlanChildrenUnchanged is the common steady-state case: the plugin
// asks for the children that already exist, and nothing is written.
func BenchmarkPlanChildrenUnchanged(b *testing.B) {
	owns := map[schema.GroupKind]Kind{{Kind: "ConfigMap"}: cmKind}
	parent := widget()
	var observed, desired []*unstructured.Unstructured
	for i := range 10 {
		name := "c" + string(rune('a'+i))
		observed = append(observed, ownedCM(name, map[string]any{"size": "small", "index": int64(i)}))
		desired = append(desired, desiredCM(name, map[string]any{"size": "small", "index": int64(i)}))
	}
	b.ReportAllocs()
	for b.Loop() {
		actions, err := planChildren(parent, true, owns, observed, desired)
		if err != nil || len(actions) != 0 {
			b.Fatalf("actions %v, err %v", actions, err)
		}
	}
}

// BenchmarkDesiredStatusUnchanged computes a status that equals the observed
// one, as every resync of a converged object does.
func BenchmarkDesiredStatusUnchanged(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := readyCondition{status: "True", reason: ReasonReconciled, message: "reconciled"}
	plugin := map[string]any{"state": "Provisioned", "lastProvisioned": "2026-01-01T00:00:00Z"}
	observed := desiredStatus(nil, plugin, 3, ready, now)
	b.ReportAllocs()
	for b.Loop() {
		if !objjson.ValueEqual(observed, desiredStatus(observed, plugin, 3, ready, now.Add(time.Hour))) {
			b.Fatal("status changed")
		}
	}
}
