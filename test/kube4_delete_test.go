package test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlDryRunDeleteHeld: `kubectl delete --dry-run=server` of a
// configmap that a finalizer holds, and the same request by hand, answer
// as kube-apiserver v1.34 answers them: 200 with the configmap as the
// delete would leave it (a deletionTimestamp, a grace period of 0, the
// stored resourceVersion), while the stored one is left as it was. Without
// a finalizer the answer is the Status of a deleted object.
func TestKubectlDryRunDeleteHeld(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	kubectl := s.MustKubectl
	kubectl("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\ndata: {a: b}\n", "apply", "-f", "-")
	rv := kubectl("", "get", "cm", "held", "-o", "jsonpath={.metadata.resourceVersion}")

	if got := kubectl("", "delete", "cm", "held", "--dry-run=server"); got != "configmap \"held\" deleted (server dry run)\n" {
		t.Errorf("kubectl delete --dry-run=server: %q", got)
	}
	code, body, err := s.Do(http.MethodDelete, "/api/v1/namespaces/default/configmaps/held?dryRun=All", s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind     string
		Metadata struct {
			ResourceVersion            string
			DeletionTimestamp          *string
			DeletionGracePeriodSeconds *int64
			Finalizers                 []string
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("dry-run delete answered %d %s: %v", code, body, err)
	}
	m := got.Metadata
	if code != http.StatusOK || got.Kind != "ConfigMap" || m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil ||
		*m.DeletionGracePeriodSeconds != 0 || m.ResourceVersion != rv || len(m.Finalizers) != 1 {
		t.Errorf("dry-run delete answered %d %s; want 200 with the configmap marked deleted, resourceVersion %s", code, body, rv)
	}
	if ts := kubectl("", "get", "cm", "held", "-o", "jsonpath={.metadata.deletionTimestamp}/{.metadata.resourceVersion}"); ts != "/"+rv {
		t.Errorf("after the dry runs the stored configmap has deletionTimestamp/resourceVersion %q, want none/%s", ts, rv)
	}

	kubectl("", "create", "configmap", "free")
	code, body, err = s.Do(http.MethodDelete, "/api/v1/namespaces/default/configmaps/free?dryRun=All", s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Kind, Status string }
	if err := json.Unmarshal(body, &st); err != nil || code != http.StatusOK || st.Kind != "Status" || st.Status != "Success" {
		t.Errorf("dry-run delete of a free configmap answered %d %s; want 200 and a Status Success", code, body)
	}
	kubectl("", "get", "cm", "free")
}
