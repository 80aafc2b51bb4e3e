package serving

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// TestAuditWriteSecretAtMetadata: the server's own writes of a Secret
// (create, patch, delete, and one that fails), audited at Metadata level,
// leave no trace of its values in the log, in either stage.
func TestAuditWriteSecretAtMetadata(t *testing.T) {
	out := &auditLog{}
	a := newAuditor(t, `
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  resources: [{group: "", resources: [secrets]}]
- level: RequestResponse
`, out, 0, nil)
	const value = "hunter2-in-process"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	sys := &user.DefaultInfo{Name: "system:setpoint:garbage-collector", Groups: []string{"system:setpoint:system", user.AllAuthenticated}}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "s", "namespace": "ns1", "uid": "u1", "resourceVersion": "3"},
		"data":       map[string]any{"password": encoded},
		"stringData": map[string]any{"token": value},
	}}
	attrs := func(verb string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: sys, Verb: verb, APIVersion: "v1", Resource: "secrets",
			Namespace: "ns1", Name: "s", ResourceRequest: true}
	}
	ctx := context.Background()
	a.AuditWrite(ctx, attrs("create"), secret)(secret, nil)
	patch := &runtime.Unknown{Raw: []byte(`{"data":{"password":"` + encoded + `"}}`), ContentType: runtime.ContentTypeJSON}
	a.AuditWrite(ctx, attrs("patch"), patch)(secret, nil)
	a.AuditWrite(ctx, attrs("update"), secret)(nil, errStatus(409, "Conflict", "the object has been modified"))
	a.AuditWrite(ctx, attrs("delete"), nil)(secret, nil)
	// A widget at RequestResponse: its body is there, so the log is read.
	a.AuditWrite(ctx, authorizer.AttributesRecord{User: sys, Verb: "create", APIGroup: "example.setpoint.dev", APIVersion: "v1",
		Resource: "widgets", Namespace: "ns1", ResourceRequest: true}, secret)(secret, nil)
	_ = a.Close()

	evs := out.events(t)
	if len(evs) != 10 {
		t.Fatalf("%d events, want 10:\n%s", len(evs), out.String())
	}
	for _, ev := range evs[:8] {
		if ev.Level != "Metadata" || ev.RequestObject != nil || ev.ResponseObject != nil {
			t.Errorf("%s %s at %s: level %s, request %v, response %v", ev.Verb, ev.ObjectRef.Resource, ev.Stage, ev.Level, ev.RequestObject, ev.ResponseObject)
		}
	}
	secretLines := strings.Join(strings.Split(out.String(), "\n")[:8], "\n")
	if strings.Contains(secretLines, value) || strings.Contains(secretLines, encoded) {
		t.Errorf("a Secret's value is in the log at Metadata level:\n%s", secretLines)
	}
	if !strings.Contains(out.String(), encoded) {
		t.Error("the RequestResponse event holds no body: the check above proves nothing")
	}
}
