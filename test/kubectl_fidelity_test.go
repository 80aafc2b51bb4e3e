package test

import (
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// fidelityCRD is a small namespaced kind without a strategic merge patch
// type, as every custom resource is.
const fidelityCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.fidelity.setpoint.dev
spec:
  group: fidelity.setpoint.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
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
              size: {type: string}
`

// TestKubectlAsAgainstKubeAPIServer: the real kubectl shows what it shows
// against kube-apiserver v1.34 for the commands where the two once
// differed: CRDs are in the category api-extensions and a custom
// resource's verbs in apiextensions' order; a strategic merge
// patch of a custom resource fails with kube-apiserver's message; auth
// whoami's review has a creation time; a namespace has the finalizer
// kubernetes in spec.finalizers and is still deleted; /version is
// indented.
func TestKubectlAsAgainstKubeAPIServer(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	kubectl(fidelityCRD, "apply", "-f", "-")
	kubectl("", "wait", "--for=condition=Established", "crd/gadgets.fidelity.setpoint.dev", "--timeout=30s")

	t.Run("api-resources", func(t *testing.T) {
		out := kubectl("", "api-resources", "--api-group=apiextensions.k8s.io", "-o", "wide")
		if f := strings.Fields(lastLine(out)); len(f) == 0 || f[0] != "customresourcedefinitions" || f[len(f)-1] != "api-extensions" {
			t.Errorf("kubectl api-resources -o wide: %q, want CRDs in the category api-extensions", out)
		}
		// A custom resource's verbs in the order of kube-apiserver's
		// apiextensions discovery; a built-in kind's sorted.
		for group, want := range map[string]string{
			"fidelity.setpoint.dev":     "gadgets fidelity.setpoint.dev/v1 true Gadget delete,deletecollection,get,list,patch,create,update,watch",
			"rbac.authorization.k8s.io": "roles rbac.authorization.k8s.io/v1 true Role create,delete,deletecollection,get,list,patch,update,watch",
		} {
			out := kubectl("", "api-resources", "--api-group="+group, "-o", "wide")
			if got := strings.Join(strings.Fields(lastLine(out)), " "); got != want {
				t.Errorf("kubectl api-resources --api-group=%s -o wide: last row %q, want %q", group, got, want)
			}
		}
	})

	t.Run("strategic patch of a custom resource", func(t *testing.T) {
		kubectl("apiVersion: fidelity.setpoint.dev/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {size: small}\n", "create", "-f", "-")
		_, errOut, err := s.Kubectl("patch", "gadget", "g", "-p", `{"spec":{"size":"large"}}`)
		const want = "error: application/strategic-merge-patch+json is not supported by fidelity.setpoint.dev/v1, Kind=Gadget: " +
			"the body of the request was in an unknown format - accepted media types include: " +
			"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml\n"
		if err == nil || errOut != want {
			t.Errorf("kubectl patch: %v\n got %q\nwant %q", err, errOut, want)
		}
	})

	t.Run("whoami", func(t *testing.T) {
		got := kubectl("", "auth", "whoami", "-o", "jsonpath={.metadata.creationTimestamp}")
		if ts, err := time.Parse(time.RFC3339, got); err != nil || time.Since(ts) > time.Minute {
			t.Errorf("auth whoami: creationTimestamp %q, want the time of the review", got)
		}
	})

	t.Run("namespace finalizers", func(t *testing.T) {
		kubectl("", "create", "namespace", "fin")
		if got := kubectl("", "get", "namespace", "fin", "-o", "jsonpath={.spec.finalizers}"); got != `["kubernetes"]` {
			t.Errorf("spec.finalizers of a new namespace: %q, want [\"kubernetes\"]", got)
		}
		if got := kubectl("", "delete", "namespace", "fin", "--timeout=30s"); got != "namespace \"fin\" deleted\n" {
			t.Errorf("kubectl delete namespace: %q", got)
		}
		if _, errOut, err := s.Kubectl("get", "namespace", "fin"); err == nil || !strings.Contains(errOut, "NotFound") {
			t.Errorf("kubectl get namespace after delete: %v %q, want NotFound", err, errOut)
		}
	})

	t.Run("version", func(t *testing.T) {
		if got := kubectl("", "get", "--raw", "/version"); !strings.HasPrefix(got, "{\n  \"major\": \"1\",\n  \"minor\": ") {
			t.Errorf("kubectl get --raw /version: %q, want JSON indented by two spaces", got)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
