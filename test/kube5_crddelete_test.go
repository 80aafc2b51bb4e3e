package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testsupport"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlCRDDeleteMarks: the first delete of a CustomResourceDefinition
// marks it deleted as kube-apiserver v1.34's CRD storage does: with its
// cleanup finalizer, no deletionGracePeriodSeconds and no finalizer for the
// propagation policy (here Orphan). A second delete of the CRD, which a
// finalizer still holds, goes through the generic registry: the policy's
// finalizer is added and the grace period set to 0.
func TestKubectlCRDDeleteMarks(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	kubectl(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.kube5.setpoint.dev, finalizers: [example.com/hold]}
spec:
  group: kube5.setpoint.dev
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, "apply", "-f", "-")
	const crd = "crd/gadgets.kube5.setpoint.dev"
	const path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.kube5.setpoint.dev"
	// dryDelete answers what an orphaning delete would leave, as a
	// server-side dry run: the finalizers that any garbage collection
	// would take away at once are still there.
	dryDelete := func() string {
		code, b, err := s.Do(http.MethodDelete, path, s.Token, strings.NewReader(`{"propagationPolicy":"Orphan","dryRun":["All"]}`))
		if err != nil || code != http.StatusOK {
			t.Fatalf("dry-run delete: %d %s %v", code, b, err)
		}
		var got struct {
			Metadata struct {
				DeletionTimestamp          *string
				DeletionGracePeriodSeconds *int64
				Finalizers                 []string
			}
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		m := got.Metadata
		grace := "none"
		if m.DeletionGracePeriodSeconds != nil {
			grace = fmt.Sprint(*m.DeletionGracePeriodSeconds)
		}
		return fmt.Sprintf("%v/%s/%q", m.DeletionTimestamp != nil, grace, m.Finalizers)
	}
	if got, want := dryDelete(), `true/none/["example.com/hold" "customresourcecleanup.apiextensions.k8s.io"]`; got != want {
		t.Errorf("first delete (dry run): deleting/grace/finalizers %s, want %s", got, want)
	}
	kubectl("", "delete", crd, "--cascade=orphan", "--wait=false")
	if got := kubectl("", "get", crd, "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}/{.metadata.deletionTimestamp}"); !strings.HasPrefix(got, "/") || got == "/" {
		t.Errorf("after the first delete: deleting/grace %q, want a deletionTimestamp and no grace period", got)
	}
	// The cleanup finalizer goes once the CRD's objects (none) are gone.
	testsupport.Eventually(t, 30*time.Second, "cleanup finalizer removed", func() bool {
		return kubectl("", "get", crd, "-o", "jsonpath={.metadata.finalizers}") == `["example.com/hold"]`
	})
	if got, want := dryDelete(), `true/0/["example.com/hold" "orphan"]`; got != want {
		t.Errorf("second delete (dry run): deleting/grace/finalizers %s, want %s", got, want)
	}
	kubectl("", "delete", crd, "--cascade=orphan", "--wait=false")
	if got := kubectl("", "get", crd, "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}"); got != "0" {
		t.Errorf("after the second delete: grace %q, want 0", got)
	}
	kubectl("", "patch", crd, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
}
