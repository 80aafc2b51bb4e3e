package test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestServerSideApplyKubectl drives server-side apply with the real
// kubectl: create, re-apply, conflicts between field managers, forcing,
// server dry run and diff.
func TestServerSideApplyKubectl(t *testing.T) {
	const ns = "ssa"
	s, _ := clientGoSetup(t, ns)
	kubectl := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, err := s.Kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	apply := func(manifest string, args ...string) (string, string, error) {
		return s.KubectlInput(manifest, append([]string{"apply", "--server-side", "-n", ns, "-f", "-"}, args...)...)
	}
	mustApply := func(t *testing.T, manifest string, args ...string) string {
		t.Helper()
		out, errOut, err := apply(manifest, args...)
		if err != nil {
			t.Fatalf("kubectl apply --server-side %v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}
	get := func(t *testing.T, path string) string {
		t.Helper()
		return kubectl(t, "get", "widget", "w", "-n", ns, "-o", "jsonpath={"+path+"}")
	}

	if out := mustApply(t, widgetManifest("w", "small", "")); !strings.Contains(out, "widget.example.setpoint.dev/w serverside-applied") {
		t.Fatalf("create: %s", out)
	}
	if got := get(t, ".metadata.managedFields[0].manager"); got != "kubectl" {
		t.Fatalf("manager after create: %q", got)
	}
	if got := get(t, ".metadata.managedFields[0].operation"); got != "Apply" {
		t.Fatalf("operation after create: %q", got)
	}

	mustApply(t, widgetManifest("w", "medium", ""))
	if got := get(t, ".spec.size"); got != "medium" {
		t.Fatalf("re-apply with a change: size %q", got)
	}
	rv := get(t, ".metadata.resourceVersion")
	mustApply(t, widgetManifest("w", "medium", ""))
	if got := get(t, ".metadata.resourceVersion"); got != rv {
		t.Fatalf("unchanged re-apply wrote: resourceVersion %s -> %s", rv, got)
	}

	out, errOut, err := apply(widgetManifest("w", "large", ""), "--field-manager=other")
	if err == nil {
		t.Fatalf("a second manager changed the field without a conflict: %s", out)
	}
	for _, want := range []string{"conflict", `"kubectl"`, ".spec.size"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("conflict message lacks %q:\n%s", want, errOut)
		}
	}
	if got := get(t, ".spec.size"); got != "medium" {
		t.Fatalf("a conflicting apply changed size to %q", got)
	}

	if out := mustApply(t, widgetManifest("w", "large", ""), "--field-manager=other", "--dry-run=server", "--force-conflicts"); !strings.Contains(out, "server dry run") {
		t.Errorf("server dry run: %s", out)
	}
	if got := get(t, ".spec.size"); got != "medium" {
		t.Fatalf("a server dry run changed size to %q", got)
	}

	// kubectl diff exits 1 when there is a difference.
	out, errOut, err = s.KubectlInput(widgetManifest("w", "large", ""), "diff", "--server-side", "--force-conflicts", "-n", ns, "-f", "-")
	if !strings.Contains(out, "-  size: medium") || !strings.Contains(out, "+  size: large") {
		t.Errorf("diff --server-side (%v): %s%s", err, out, errOut)
	}

	mustApply(t, widgetManifest("w", "large", ""), "--field-manager=other", "--force-conflicts")
	if got := get(t, ".spec.size"); got != "large" {
		t.Fatalf("forced apply: size %q", got)
	}
	mf := get(t, ".metadata.managedFields[*].manager")
	if !strings.Contains(mf, "other") {
		t.Fatalf("managers after a forced apply: %s", mf)
	}

	// A label the applier stops applying goes.
	mustApply(t, widgetManifest("w", "large", "team: x"), "--field-manager=other")
	if got := get(t, ".metadata.labels.team"); got != "x" {
		t.Fatalf("label: %q", got)
	}
	mustApply(t, widgetManifest("w", "large", ""), "--field-manager=other")
	if got := get(t, ".metadata.labels.team"); got != "" {
		t.Fatalf("label left after it was no longer applied: %q", got)
	}

	// Other writes are recorded as Update by the User-Agent's manager.
	kubectl(t, "label", "widget", "w", "-n", ns, "env=dev")
	if mf := get(t, `.metadata.managedFields[?(@.operation=="Update")].manager`); !strings.Contains(mf, "kubectl-label") {
		t.Fatalf("managers of a kubectl label: %q", mf)
	}

	// Built-in kinds apply too: a namespace, and a CRD.
	nsManifest := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: applied\n  labels: {team: x}\n"
	if out, errOut, err := s.KubectlInput(nsManifest, "apply", "--server-side", "-f", "-"); err != nil || !strings.Contains(out, "namespace/applied serverside-applied") {
		t.Fatalf("apply namespace: %v\n%s%s", err, out, errOut)
	}
	if got := kubectl(t, "get", "namespace", "applied", "-o", "jsonpath={.metadata.labels.team}/{.metadata.managedFields[0].operation}"); got != "x/Apply" {
		t.Fatalf("applied namespace: %q", got)
	}
	if out := kubectl(t, "apply", "--server-side", "-f", "../examples/widget/provision-crd.yaml"); !strings.Contains(out, "serverside-applied") {
		t.Fatalf("apply CRD: %s", out)
	}
	kubectl(t, "wait", "--for=condition=Established", "crd/widgetprovisions.example.setpoint.dev", "--timeout=20s")

	// A built-in kind's managedFields are those kube-apiserver v1.34
	// records for the same commands: a map's members without the map, and
	// nothing left of a map whose every member a forced apply took.
	conf := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n  labels: {team: x}\n  annotations: {note: a}\ndata: {a: \"1\", b: \"2\"}\n"
	mustApply(t, conf)
	fields := func(t *testing.T) string {
		t.Helper()
		return kubectl(t, "get", "configmap", "conf", "-n", ns, "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}={.fieldsV1};{end}")
	}
	if got, want := fields(t), `kubectl={"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:annotations":{"f:note":{}},"f:labels":{"f:team":{}}}};`; got != want {
		t.Errorf("managedFields of an applied ConfigMap:\n got %s\nwant %s", got, want)
	}
	mustApply(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata: {a: \"3\", b: \"4\"}\n", "--field-manager=other", "--force-conflicts")
	if got, want := fields(t), `kubectl={"f:metadata":{"f:annotations":{"f:note":{}},"f:labels":{"f:team":{}}}};other={"f:data":{"f:a":{},"f:b":{}}};`; got != want {
		t.Errorf("managedFields after a forced apply:\n got %s\nwant %s", got, want)
	}
}

// TestServerSideApplyClientGo applies with client-go's dynamic client, to
// the object and to its status.
func TestServerSideApplyClientGo(t *testing.T) {
	const ns = "ssacg"
	_, dc := clientGoSetup(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	widgets := dc.Resource(widgetsGVR).Namespace(ns)

	w := newWidget(ns, "a", "small", map[string]string{"app": "x"})
	out, err := widgets.Apply(ctx, "a", w, metav1.ApplyOptions{FieldManager: "cg"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if out.GetUID() == "" || len(out.GetManagedFields()) != 1 || out.GetManagedFields()[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("applied: %v", out.Object["metadata"])
	}

	other := newWidget(ns, "a", "large", nil)
	_, err = widgets.Apply(ctx, "a", other, metav1.ApplyOptions{FieldManager: "other"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: %v", err)
	}
	if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Details == nil || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0].Field != ".spec.size" {
		t.Fatalf("conflict details: %#v", err)
	}
	out, err = widgets.Apply(ctx, "a", other, metav1.ApplyOptions{FieldManager: "other", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if size, _, _ := unstructured.NestedString(out.Object, "spec", "size"); size != "large" {
		t.Fatalf("forced apply: size %q", size)
	}

	status := newWidget(ns, "a", "small", nil)
	delete(status.Object, "spec")
	status.Object["status"] = map[string]any{"state": "Ready"}
	out, err = widgets.ApplyStatus(ctx, "a", status, metav1.ApplyOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatalf("apply status: %v", err)
	}
	if st, _, _ := unstructured.NestedString(out.Object, "status", "state"); st != "Ready" {
		t.Fatalf("status.state %q", st)
	}
	found := false
	for _, e := range out.GetManagedFields() {
		found = found || (e.Manager == "controller" && e.Subresource == "status")
	}
	if !found {
		t.Fatalf("no status entry in %v", out.GetManagedFields())
	}

	// Without a field manager, an apply is refused.
	_, err = widgets.Apply(ctx, "a", w, metav1.ApplyOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "fieldManager") {
		t.Fatalf("apply without a field manager: %v", err)
	}
}
