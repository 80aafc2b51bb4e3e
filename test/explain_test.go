package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlExplainBuiltins checks that kubectl explain describes the
// built-in kinds field by field, nested fields included, as it does on
// Kubernetes: the server's OpenAPI v3 documents give each Go type a model
// of its own that fields refer to, and kubectl names a field's type after
// it.
func TestKubectlExplainBuiltins(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	tests := []struct {
		field string
		want  []string
	}{
		{"crd.spec.versions", []string{"<[]CustomResourceDefinitionVersion>", "additionalPrinterColumns", "deprecationWarning", "served", "storage", "subresources"}},
		{"crd.spec.versions.schema.openAPIV3Schema", []string{"x-kubernetes-validations", "properties"}},
		{"crd.status.conditions.reason", []string{"<string>"}},
		{"events.involvedObject", []string{"<ObjectReference>", "fieldPath", "resourceVersion", "uid"}},
		{"events.lastTimestamp", []string{"<string>"}},
		{"namespace.status", []string{"<NamespaceStatus>", "conditions	<[]NamespaceCondition>", "phase", "enum: Active, Terminating"}},
		{"namespace.spec.finalizers", []string{"<[]string>"}},
		{"selfsubjectaccessreviews.spec", []string{"<SelfSubjectAccessReviewSpec>", "resourceAttributes\t<ResourceAttributes>"}},
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
	// What kubectl prints in full, as against kube-apiserver v1.34: each
	// field's type named after its model, required fields and enums marked.
	// The descriptions are those of the k8s.io/api version in go.mod (v1.34
	// words a few of them differently).
	for _, args := range [][]string{
		{"namespaces"}, {"namespaces.spec"}, {"namespaces", "--recursive"}, {"configmaps"}, {"roles.rules"}, {"leases.spec"},
	} {
		out, errOut, err := s.Kubectl(append([]string{"explain"}, args...)...)
		if err != nil {
			t.Errorf("kubectl explain %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			continue
		}
		want, err := os.ReadFile(filepath.Join("testdata", "explain", strings.Join(args, "-")+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), out); diff != "" {
			t.Errorf("kubectl explain %s (-want +got):\n%s", strings.Join(args, " "), diff)
		}
	}
}
