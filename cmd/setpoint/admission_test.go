package main

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
)

// plainMutator changes the object, announcing it first.
type plainMutator struct{}

func (plainMutator) Mutate(_ context.Context, req *engine.AdmissionRequest, changing func()) error {
	changing()
	req.Object.SetLabels(map[string]string{"mutated": "yes"})
	return nil
}
func (plainMutator) Validate(context.Context, *engine.AdmissionRequest) error { return nil }

// The chain passes changing to each admitter: called before the one that
// changes the object, never for those that do not (engine.AdmitterFuncs
// without a MutateFunc never changes it).
func TestAdmissionChainMutateNotify(t *testing.T) {
	silent := engine.AdmitterFuncs{}
	for _, tt := range []struct {
		name  string
		chain admissionChain
		want  int
	}{
		{name: "silent", chain: admissionChain{silent, silent}, want: 0},
		{name: "plain mutator", chain: admissionChain{silent, plainMutator{}}, want: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &engine.AdmissionRequest{Operation: engine.OpCreate, Object: &unstructured.Unstructured{Object: map[string]any{
				"metadata": map[string]any{"name": "w"},
			}}}
			calls := 0
			err := tt.chain.Mutate(context.Background(), req, func() {
				calls++
				if req.Object.GetLabels() != nil {
					t.Error("changing called after the change")
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if calls != tt.want {
				t.Errorf("changing called %d times, want %d", calls, tt.want)
			}
		})
	}
}
