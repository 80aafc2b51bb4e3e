package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// roleWithTypo misspells a rule's verbs.
const roleWithTypo = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: typo
  namespace: default
rules:
- verb: ["get"]
  verbs: ["list"]
  resources: ["pods"]
  apiGroups: [""]
`

// crdWithTypo misspells a keyword of its schema (minimun), whose
// properties include a name with a dot in it.
const crdWithTypo = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: typos.unknown.setpoint.dev
spec:
  group: unknown.setpoint.dev
  scope: Namespaced
  names: {plural: typos, kind: Typo, singular: typo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimun: 1}
              a.b: {type: string}
`

// TestKubectlNestedUnknownFields: the real kubectl, which asks for
// fieldValidation=Strict by default, gets kube-apiserver v1.34's answer
// for a built-in object with an unknown field below its top level (a
// Role's rule, a CRD's schema keyword), and with --validate=warn its
// warning and the object stored without the field.
func TestKubectlNestedUnknownFields(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	role, crd := file("role-with-typo.yaml", roleWithTypo), file("crd-with-typo.yaml", crdWithTypo)

	_, errOut, err := s.Kubectl("apply", "-f", role)
	want := `Error from server (BadRequest): error when creating "` + role + `": Role in version "v1" cannot be handled as a Role: ` +
		`strict decoding error: unknown field "rules[0].verb"` + "\n"
	if err == nil || errOut != want {
		t.Errorf("kubectl apply: %v\n got %q\nwant %q", err, errOut, want)
	}

	for _, tc := range []struct {
		name, file, warning, get, want string
	}{
		{"Role", role, `Warning: unknown field "rules[0].verb"`,
			"role/typo", `[{"apiGroups":[""],"resources":["pods"],"verbs":["list"]}]`},
		{"CRD", crd, `Warning: unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.minimun"`,
			"crd/typos.unknown.setpoint.dev", `{"a.b":{"type":"string"},"size":{"type":"integer"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := s.Kubectl("apply", "--validate=warn", "-f", tc.file)
			if err != nil || strings.TrimSpace(errOut) != tc.warning {
				t.Fatalf("kubectl apply --validate=warn: %v\n got %q\nwant %q", err, errOut, tc.warning)
			}
			path := "{.rules}"
			if tc.name == "CRD" {
				path = "{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties}"
			}
			out, errOut, err := s.Kubectl("get", tc.get, "-o", "jsonpath="+path)
			if err != nil || out != tc.want {
				t.Errorf("kubectl get %s: %v %s\n got %s\nwant %s", tc.get, err, errOut, out, tc.want)
			}
		})
	}
}
