package test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlExplainBuiltins checks that kubectl explain describes the
// built-in kinds field by field, nested fields included, as it does on
// Kubernetes.
func TestKubectlExplainBuiltins(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	tests := []struct {
		field string
		want  []string
	}{
		{"crd.spec.versions", []string{"<[]Object>", "additionalPrinterColumns", "deprecationWarning", "served", "storage", "subresources"}},
		{"crd.spec.versions.schema.openAPIV3Schema", []string{"x-kubernetes-validations", "properties"}},
		{"crd.status.conditions.reason", []string{"<string>"}},
		{"events.involvedObject", []string{"fieldPath", "resourceVersion", "uid"}},
		{"events.lastTimestamp", []string{"<string>"}},
		{"namespace.status", []string{"conditions", "phase"}},
		{"namespace.spec.finalizers", []string{"<[]string>"}},
	}
	for _, tt := range tests {
		out, errOut, err := s.Kubectl("explain", tt.field)
		if err != nil {
			t.Errorf("kubectl explain %s: %v\n%s%s", tt.field, err, out, errOut)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl explain %s lacks %q:\n%s", tt.field, w, out)
			}
		}
	}
}
