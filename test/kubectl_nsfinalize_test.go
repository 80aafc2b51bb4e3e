package test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestKubectlNamespaceFinalize: namespace termination as kube-apiserver
// v1.34 and its namespace controller do it, seen through the real kubectl.
// A deleted namespace is Terminating, held by spec.finalizers (not
// metadata.finalizers); a finalizer of someone else's there keeps it once
// the collector has emptied it and removed kubernetes; kubectl replace
// --raw .../finalize frees it, with finalizer names validated and the
// write authorized as update of namespaces/finalize.
func TestKubectlNamespaceFinalize(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	nsJSON := func(name string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(kubectl("", "get", "ns", name, "-o", "json", "--show-managed-fields")), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	finalize := func(name string, ns map[string]any, fins []any, extra ...string) (string, string, error) {
		t.Helper()
		ns["spec"] = map[string]any{"finalizers": fins}
		b, _ := json.Marshal(ns)
		f := filepath.Join(t.TempDir(), "ns.json")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return s.Kubectl(append([]string{"replace", "--raw", "/api/v1/namespaces/" + name + "/finalize", "-f", f}, extra...)...)
	}

	// Applied, so that it has managedFields for writes to be recorded in.
	kubectl("apiVersion: v1\nkind: Namespace\nmetadata: {name: held, labels: {team: a}}\nspec: {finalizers: [example.com/keep]}\n", "apply", "--server-side", "-f", "-")
	kubectl("", "create", "configmap", "c1", "-n", "held")
	if got := kubectl("", "get", "ns", "held", "-o", "jsonpath={.spec.finalizers}"); got != `["example.com/keep","kubernetes"]` {
		t.Errorf("spec.finalizers of the new namespace: %s", got)
	}
	if got := kubectl("", "delete", "ns", "held", "--wait=false"); got != "namespace \"held\" deleted\n" {
		t.Errorf("kubectl delete ns: %q", got)
	}
	// Emptied: kubernetes leaves spec.finalizers, through /finalize; the
	// namespace's own finalizer keeps it.
	testsupport.Poll(t, 20*time.Second, "kubernetes removed from spec.finalizers", func() (bool, string) {
		got := kubectl("", "get", "ns", "held", "-o", "jsonpath={.spec.finalizers}")
		return got == `["example.com/keep"]`, got
	})
	if out, _, _ := s.Kubectl("get", "configmap", "c1", "-n", "held", "-o", "name"); out != "" {
		t.Errorf("the configmap of the emptied namespace: %q, want gone", out)
	}
	ns := nsJSON("held")
	meta := ns["metadata"].(map[string]any)
	status, _ := ns["status"].(map[string]any)
	if meta["finalizers"] != nil || meta["deletionTimestamp"] == nil || meta["deletionGracePeriodSeconds"] != nil || status["phase"] != "Terminating" {
		t.Errorf("kubectl get ns held -o json: metadata %v, status %v; want Terminating, no metadata.finalizers, no grace period", meta, status)
	}
	if mf, _ := json.Marshal(meta["managedFields"]); !strings.Contains(string(mf), `"subresource":"finalize"`) {
		t.Errorf("managedFields %s: want the collector's write through finalize", mf)
	}
	conds, _ := json.Marshal(status["conditions"])
	for _, want := range []string{`"type":"NamespaceDeletionDiscoveryFailure"`, `"type":"NamespaceContentRemaining"`, `"type":"NamespaceFinalizersRemaining"`} {
		if !strings.Contains(string(conds), want) {
			t.Errorf("status.conditions %s lack %s", conds, want)
		}
	}
	// A delete again answers the namespace as it is.
	if got := kubectl("", "delete", "--raw", "/api/v1/namespaces/held"); !strings.Contains(got, `"kind":"Namespace"`) || !strings.Contains(got, `"phase":"Terminating"`) {
		t.Errorf("kubectl delete --raw of the held namespace: %s", got)
	}

	// Finalizer names are validated as kube-apiserver validates them.
	_, errOut, err := finalize("held", nsJSON("held"), []any{"bad", "Bad/x"})
	if err == nil || !strings.Contains(errOut, `The Namespace "held" is invalid: `) ||
		!strings.Contains(errOut, `spec.finalizers[0]: Invalid value: "bad": name is neither a standard finalizer name nor is it fully qualified`) ||
		!strings.Contains(errOut, `spec.finalizers[1]: Invalid value: "Bad/x": prefix part a lowercase RFC 1123 subdomain`) {
		t.Errorf("finalize with invalid names: %v %q", err, errOut)
	}

	// Authorized as update of namespaces/finalize: update of namespaces is
	// not enough.
	kubectl(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ns-updater}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ns-updater}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ns-updater}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`, "apply", "-f", "-")
	_, errOut, err = finalize("held", nsJSON("held"), []any{}, "--as=alice")
	// kube-apiserver's request info gives the namespace's own name as the
	// request's namespace.
	if want := `namespaces "held" is forbidden: User "alice" cannot update resource "namespaces/finalize" in API group "" in the namespace "held"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("finalize as alice without namespaces/finalize: %v %q, want %q", err, errOut, want)
	}
	kubectl(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ns-updater}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [get, update]}
- {apiGroups: [""], resources: [namespaces/finalize], verbs: [update]}
`, "apply", "-f", "-")
	if _, errOut, err := finalize("held", nsJSON("held"), []any{}, "--as=alice"); err != nil {
		t.Fatalf("finalize as alice: %v %s", err, errOut)
	}
	if _, errOut, err := s.Kubectl("get", "ns", "held"); err == nil || !strings.Contains(errOut, `namespaces "held" not found`) {
		t.Errorf("kubectl get ns after its last finalizer went: %v %q, want NotFound", err, errOut)
	}

	// client-go's typed Finalize, as kube-controller-manager's namespace
	// controller calls it.
	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kubectl("", "create", "namespace", "typed")
	typed, err := cs.CoreV1().Namespaces().Get(ctx, "typed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	typed.Spec.Finalizers = []corev1.FinalizerName{"example.com/typed"}
	if typed, err = cs.CoreV1().Namespaces().Finalize(ctx, typed, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Namespaces().Finalize: %v", err)
	}
	if len(typed.Spec.Finalizers) != 1 || typed.Spec.Finalizers[0] != "example.com/typed" || typed.Status.Phase != corev1.NamespaceActive {
		t.Errorf("Namespaces().Finalize answered spec %v, status %v", typed.Spec, typed.Status.Phase)
	}
	// Held by its finalizer alone once deleted; freed by Finalize.
	kubectl("", "delete", "namespace", "typed", "--wait=false")
	if typed, err = cs.CoreV1().Namespaces().Get(ctx, "typed", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	typed.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, typed, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Namespaces().Finalize: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "typed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace after its last finalizer went: %v, want NotFound", err)
	}

	// Discovery lists the subresource, update only, as kube-apiserver does.
	if out := kubectl("", "get", "--raw", "/api/v1"); !strings.Contains(out, `{"name":"namespaces/finalize","singularName":"","namespaced":false,"kind":"Namespace","verbs":["update"]}`) {
		t.Errorf("/api/v1 lacks namespaces/finalize: %s", out)
	}
	if _, errOut, err := s.Kubectl("get", "--raw", "/api/v1/namespaces/default/finalize"); err == nil || !strings.Contains(errOut, "MethodNotAllowed") {
		t.Errorf("GET of /finalize: %v %q, want 405", err, errOut)
	}
}
