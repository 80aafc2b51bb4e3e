package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// serveBoxes creates the CRD of the Box kind with openAPIV3Schema and returns what
// the registry serves for boxes.
func serveBoxes(t testing.TB, s *Service, openAPIV3Schema string) (*kinds.Kind, bool) {
	t.Helper()
	if _, err := s.Create(context.Background(), kinds.CRDResource, testsupport.CRD{Kind: "Box", Plural: "boxes", Schema: openAPIV3Schema}.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s.reg.Get(kindstest.Boxes)
}

// serveEnumBoxes serves boxes of kindstest.EnumBoxSchema(enum).
func serveEnumBoxes(t testing.TB, s *Service, enum int) *kinds.Kind {
	t.Helper()
	sv, ok := serveBoxes(t, s, kindstest.EnumBoxSchema(enum))
	if !ok {
		t.Fatal("boxes not served")
	}
	return sv
}
