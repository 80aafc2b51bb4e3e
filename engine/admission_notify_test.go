package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// notifyAdmitter is an Admitter whose mutation, when it has one, is
// announced by calling changing first, as the plugin admitter does.
type notifyAdmitter struct {
	mutate func(*AdmissionRequest)
	// announce calls changing even without a mutation.
	announce bool
	validate func(*AdmissionRequest)
}

func (a notifyAdmitter) Mutate(_ context.Context, req *AdmissionRequest, changing func()) error {
	if a.mutate != nil || a.announce {
		changing()
	}
	if a.mutate != nil {
		a.mutate(req)
	}
	return nil
}

func (a notifyAdmitter) Validate(_ context.Context, req *AdmissionRequest) error {
	if a.validate != nil {
		a.validate(req)
	}
	return nil
}

// plainAdmitter mutates nothing but does not know it beforehand: it calls
// changing before running whatever it runs, as a chain of admitters that
// cannot tell would.
type plainAdmitter struct{}

func (plainAdmitter) Mutate(_ context.Context, _ *AdmissionRequest, changing func()) error {
	changing()
	return nil
}
func (plainAdmitter) Validate(context.Context, *AdmissionRequest) error { return nil }

// A mutation announced through changing is still defaulted and pruned
// like the client's object, and the validating admitters see the result.
func TestNotifiedMutationIsCoerced(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	var validated map[string]any
	s.setAdmitter(notifyAdmitter{
		mutate: func(req *AdmissionRequest) {
			m := req.Object.DeepCopy().Object
			_ = unstructured.SetNestedField(m, "yes", "metadata", "labels", "mutated")
			_ = unstructured.SetNestedField(m, "x", "spec", "notInTheSchema")
			req.Object.Object = m
		},
		validate: func(req *AdmissionRequest) { validated = req.Object.DeepCopy().Object },
	})
	got, err := s.Create(ctx, widgets, widget("w", "small", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["mutated"] != "yes" {
		t.Errorf("the mutation was not applied: labels %v", got.GetLabels())
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "notInTheSchema"); found {
		t.Errorf("the mutated object was not pruned: spec %v", got.Object["spec"])
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(validated, "spec", "notInTheSchema"); found || validated == nil {
		t.Errorf("validating admission saw %v, not the pruned object", validated)
	}
}

// mutateAndCoerce copies the object only when the chain may change it: not
// for an admitter that runs no mutation, always for one that announces a
// possible change.
func TestMutateAndCoerceCopiesOnlyWhenChanging(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	sv, err := s.lookup(widgets, "default", false)
	if err != nil {
		t.Fatal(err)
	}
	obj := widget("w", "small", map[string]string{"a": "b", "c": "d"})
	obj.SetNamespace("default")
	if _, err := sv.Coerce(obj); err != nil {
		t.Fatal(err)
	}
	allocs := func(a Admitter) float64 {
		s.setAdmitter(a)
		req := newAdmissionRequest(ctx, OpCreate, sv, "", obj, nil, false)
		return testing.AllocsPerRun(100, func() {
			if err := s.mutateAndCoerce(ctx, sv, req, obj); err != nil {
				t.Fatal(err)
			}
		})
	}
	silent := allocs(notifyAdmitter{})
	announced := allocs(notifyAdmitter{announce: true})
	plain := allocs(plainAdmitter{})
	// A copy of obj makes a map each for the object, metadata, labels and
	// spec, at the least.
	if silent+4 > announced || silent+4 > plain {
		t.Errorf("allocations per call: %v with no mutation, %v announced, %v from a plain admitter; want the first at least 4 fewer", silent, announced, plain)
	}
}
