package engine

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A create by generateName is named after mutating admission, as in
// kube-apiserver, where rest.BeforeCreate generates the name: mutating
// admission sees the name "" (object and request) and may change the
// generateName, which the name is then made from; validating admission
// sees the generated name.
func TestGenerateNameAfterMutatingAdmission(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	var mutName, mutReqName, valName, valReqName string
	s.setAdmitter(AdmitterFuncs{
		MutateFunc: func(_ context.Context, req *AdmissionRequest) error {
			mutName, mutReqName = req.Object.GetName(), req.Name
			req.Object.SetGenerateName("mutated-")
			return nil
		},
		ValidateFunc: func(_ context.Context, req *AdmissionRequest) error {
			valName, valReqName = req.Object.GetName(), req.Name
			return nil
		},
	})
	w := widget("", "small", nil)
	w.SetGenerateName("sent-")
	created, err := s.Create(ctx, widgets, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mutName != "" || mutReqName != "" {
		t.Errorf("mutating admission saw name %q (request %q), want \"\"", mutName, mutReqName)
	}
	if !strings.HasPrefix(created.GetName(), "mutated-") || len(created.GetName()) != len("mutated-")+5 {
		t.Errorf("created %q, want a name made from the mutated generateName", created.GetName())
	}
	if valName != created.GetName() || valReqName != created.GetName() {
		t.Errorf("validating admission saw name %q (request %q), want %q", valName, valReqName, created.GetName())
	}
}
