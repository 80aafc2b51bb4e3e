package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// TestPrepareForUpdateMatchesStrategy compares the engine's preparation of
// a custom resource update with the strategy's PrepareForUpdate on every
// pair of Widget variants, for a kind with a status subresource (Widget)
// and one without (Box).
func TestPrepareForUpdateMatchesStrategy(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	bsv, ok := serveBoxes(t, s, ` {type: object, x-kubernetes-preserve-unknown-fields: true}`)
	wsv, _ := s.reg.Get(widgets)
	if !ok || bsv.Status || !wsv.Status || !bsv.SchemaValidated() {
		t.Fatalf("want boxes served without a status subresource and widgets with one")
	}
	vs := kindstest.WidgetVariants()
	bumped := map[bool]int{}
	for _, sv := range []*kinds.Kind{wsv, bsv} {
		for oldName, old := range vs {
			for newName, obj := range vs {
				want, got := obj.DeepCopy(), obj.DeepCopy()
				sv.Strategy("").PrepareForUpdate(ctx, want, old.DeepCopy())
				sv.PrepareForUpdate(ctx, "", got, old.DeepCopy())
				if diff := cmp.Diff(want.Object, got.Object); diff != "" {
					t.Errorf("%s: %s over %s (-strategy +PrepareForUpdate):\n%s", sv.Kind, newName, oldName, diff)
				}
				bumped[got.GetGeneration() != obj.GetGeneration()]++
			}
		}
	}
	if bumped[true] == 0 || bumped[false] == 0 {
		t.Errorf("generation bumped in %d pairs, kept in %d; want both", bumped[true], bumped[false])
	}
}

// The engine's preparation of an update against the strategy's
// PrepareForUpdate, as TestPrepareForUpdateMatchesStrategy, on 1000 pairs
// of Widget variants with random changes (kindstest.Rand, fixed seed).
func TestPrepareForUpdateSweep(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	bsv, ok := serveBoxes(t, s, ` {type: object, x-kubernetes-preserve-unknown-fields: true}`)
	wsv, _ := s.reg.Get(widgets)
	if !ok {
		t.Fatal("boxes not served")
	}
	r := kindstest.NewRand(7)
	bumped := map[bool]int{}
	for range 500 {
		old, obj := r.Widget(), r.Widget()
		for _, sv := range []*kinds.Kind{wsv, bsv} {
			want, got := obj.DeepCopy(), obj.DeepCopy()
			sv.Strategy("").PrepareForUpdate(ctx, want, old.DeepCopy())
			sv.PrepareForUpdate(ctx, "", got, old.DeepCopy())
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Fatalf("%s: %v over %v (-strategy +PrepareForUpdate):\n%s", sv.Kind, obj.Object, old.Object, diff)
			}
			bumped[got.GetGeneration() != obj.GetGeneration()]++
		}
	}
	if bumped[true] < 100 || bumped[false] < 100 {
		t.Errorf("generation bumped in %d pairs, kept in %d; want at least 100 of each", bumped[true], bumped[false])
	}
}
