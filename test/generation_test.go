package test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// generationObjects are one object of each built-in kind (and of Leases,
// served by a CRD here) created with a generation, one ConfigMap created
// without, and a CustomResourceDefinition created with one.
const generationObjects = `
apiVersion: v1
kind: ConfigMap
metadata: {name: sent, namespace: default, generation: 5}
data: {a: b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: none, namespace: default}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: sent, namespace: default, generation: 5}
stringData: {a: b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sent, namespace: default, generation: 5}
---
apiVersion: v1
kind: Namespace
metadata: {name: generation-sent, generation: 5}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sent, namespace: default, generation: 5}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: generation-sent, generation: 5}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sent, namespace: default, generation: 5}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sent}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: generation-sent, generation: 5}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: generation-sent}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: sent, namespace: default, generation: 5}
spec: {holderIdentity: a}
---
apiVersion: v1
kind: Event
metadata: {name: sent, namespace: default, generation: 5}
involvedObject: {kind: ConfigMap, name: sent, namespace: default}
reason: Test
message: "m"
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.generation.setpoint.dev, generation: 5}
spec:
  group: generation.setpoint.dev
  names: {plural: sprockets, singular: sprocket, kind: Sprocket, listKind: SprocketList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestKubectlGenerationAsKubeAPIServer: the real kubectl sees
// metadata.generation as kube-apiserver v1.34 shows it (the wanted values
// are what it answered to the same commands). Only a
// CustomResourceDefinition counts one (1 on create, one more per change of
// its spec); the other built-in kinds keep what their creator sent,
// nothing or a number, through every update; so kubectl get -o yaml and
// kubectl diff of a ConfigMap show none.
func TestKubectlGenerationAsKubeAPIServer(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	kubectl(generationObjects, "create", "-f", "-")
	const columns = "custom-columns=K:.kind,N:.metadata.name,G:.metadata.generation"
	const created = `K                          N                                   G
ConfigMap                  sent                                5
ConfigMap                  none                                <none>
Secret                     sent                                5
ServiceAccount             sent                                5
Namespace                  generation-sent                     5
Role                       sent                                5
ClusterRole                generation-sent                     5
RoleBinding                sent                                5
ClusterRoleBinding         generation-sent                     5
Lease                      sent                                5
Event                      sent                                5
CustomResourceDefinition   sprockets.generation.setpoint.dev   1
`
	if got := kubectl(generationObjects, "get", "-f", "-", "-o", columns); got != created {
		t.Errorf("created:\n%s\nwant\n%s", got, created)
	}

	// Changes of content, and a generation the client sends, move nothing.
	for _, p := range []struct{ args, patch string }{
		{"cm sent", `{"metadata":{"generation":9},"data":{"a":"c"}}`},
		{"cm none", `{"metadata":{"generation":9},"data":{"a":"c"}}`},
		{"secret sent", `{"stringData":{"a":"z"}}`},
		{"sa sent", `{"automountServiceAccountToken":false}`},
		{"role sent", `{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`},
		{"clusterrole generation-sent", `{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`},
		{"rolebinding sent", `{"subjects":[{"kind":"User","name":"x"}]}`},
		{"clusterrolebinding generation-sent", `{"subjects":[{"kind":"User","name":"x"}]}`},
		{"lease sent", `{"spec":{"holderIdentity":"b"}}`},
		{"event sent", `{"message":"changed"}`},
		{"crd sprockets.generation.setpoint.dev", `{"metadata":{"generation":9,"labels":{"a":"b"}}}`},
	} {
		kubectl("", append(append([]string{"patch"}, strings.Fields(p.args)...), "--type=merge", "-p", p.patch)...)
	}
	kubectl("", "patch", "crd", "sprockets.generation.setpoint.dev", "--type=json", "-p",
		`[{"op":"add","path":"/spec/names/shortNames","value":["spr"]}]`)
	want := strings.Replace(created, "sprockets.generation.setpoint.dev   1", "sprockets.generation.setpoint.dev   2", 1)
	if got := kubectl(generationObjects, "get", "-f", "-", "-o", columns); got != want {
		t.Errorf("after updates:\n%s\nwant\n%s", got, want)
	}

	kubectl("", "create", "configmap", "plain", "--from-literal=a=b")
	if got := kubectl("", "get", "configmap", "plain", "-o", "yaml"); strings.Contains(got, "generation") {
		t.Errorf("kubectl get configmap -o yaml shows a generation:\n%s", got)
	}
	if out, errOut, err := s.Setpoint("describe", "configmap", "plain"); err != nil || strings.Contains(out, "Generation") {
		t.Errorf("setpoint describe configmap (want no generation): %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := s.Setpoint("describe", "crd", "sprockets.generation.setpoint.dev"); err != nil || !regexp.MustCompile(`(?m)^Generation:\s+2$`).MatchString(out) {
		t.Errorf("setpoint describe crd (want generation 2): %v\n%s%s", err, out, errOut)
	}
	out, errOut, err := s.KubectlInput("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: default}\ndata: {a: c}\n", "diff", "-f", "-")
	if err == nil || !strings.Contains(out, "+  a: c") || strings.Contains(out, "generation") {
		t.Errorf("kubectl diff of a changed ConfigMap (want exit 1, the data changed, no generation): %v\n%s%s", err, out, errOut)
	}
}
