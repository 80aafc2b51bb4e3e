package kinds

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// warningLog records the warnings added to a context.
type warningLog struct {
	mu   sync.Mutex
	text []string
}

func (w *warningLog) AddWarning(agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, agent+"|"+text)
}

func (w *warningLog) sorted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string(nil), w.text...)
	sort.Strings(out)
	return out
}

// TestUpdateValidationWarningsMatchStrategy compares the warnings of the
// engine's update and status update validation with the strategies' on
// every pair of Widget variants: a CEL rule failure that ratcheting lets
// through is a warning, and the engine, which checks the rules without
// ratcheting first, must give the same ones.
func TestUpdateValidationWarningsMatchStrategy(t *testing.T) {
	r := newRegistry(t)
	sv, _ := r.Get(widgets)
	vs := kindstest.WidgetVariants()
	warned := 0
	for oldName, old := range vs {
		for newName, obj := range vs {
			for _, sub := range []string{"", "status"} {
				var want, got warningLog
				wctx := warning.WithWarningRecorder(context.Background(), &want)
				gctx := warning.WithWarningRecorder(context.Background(), &got)
				if sub == "status" {
					sv.statusStrategy.ValidateUpdate(wctx, obj.DeepCopy(), old.DeepCopy())
					sv.createValidation.validateStatusUpdate(gctx, obj.DeepCopy(), old.DeepCopy())
				} else {
					sv.strategy.ValidateUpdate(wctx, obj.DeepCopy(), old.DeepCopy())
					sv.createValidation.validateUpdate(gctx, obj.DeepCopy(), old.DeepCopy())
				}
				if diff := cmp.Diff(want.sorted(), got.sorted()); diff != "" {
					t.Errorf("%q update, %s over %s: warnings (-strategy +engine):\n%s", sub, newName, oldName, diff)
				}
				if len(want.text) > 0 {
					warned++
				}
			}
		}
	}
	if warned == 0 {
		t.Error("no pair gave a warning; want ratcheted CEL failures among them")
	}
}
