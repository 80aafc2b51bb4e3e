package abi

import (
	"testing"
	"time"
)

// object1K is an object of about one KiB, as the engine hands it over.
const object1K = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"widget-0001","namespace":"default","uid":"6f1c0a52-1b8e-4c1e-9d7a-3c2f9a1b0e11","resourceVersion":"123456","generation":3,"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app.kubernetes.io/name":"widget","app.kubernetes.io/part-of":"catalog","team":"platform","env":"production"},"annotations":{"setpoint.dev/owner":"platform-team@example.com","setpoint.dev/description":"A widget used by the plugin benchmark; its size is close to one KiB, like a typical small object of a control plane, with labels, annotations and a nested spec."}},"spec":{"name":"gizmo","size":"medium","color":"blue","tags":["alpha","beta","gamma","delta"],"replicas":3,"template":{"image":"registry.example.com/widgets/gizmo:1.2.3","args":["--verbose","--port=8080"],"env":[{"name":"MODE","value":"fast"},{"name":"LEVEL","value":"7"}]}},"status":{"state":"Ready","observedGeneration":3}}`

// The documents of one reconcile and one admission call, as the host
// writes the requests and a guest writes the responses.
var (
	benchReconcileRequest = &ReconcileRequest{Object: RawJSON(object1K), Attempt: 1, Config: map[string]string{"log": "false"},
		Children: map[string][]RawJSON{"ConfigMap": {RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"widget-0001-config"}}`)}}}
	benchReconcileResponse = &ReconcileResponse{Status: RawJSON(`{"state":"Ready","observedGeneration":3}`),
		Children:     []RawJSON{RawJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"widget-0001-config"},"data":{"size":"medium"}}`)},
		RequeueAfter: 30 * time.Second, Events: []Event{{Type: "Normal", Reason: "Provisioned", Message: "widget is ready"}}}
	benchAdmissionRequest = &AdmissionRequest{UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: GroupVersionKind{Group: "example.setpoint.dev", Version: "v1", Kind: "Widget"},
		Resource: "widgets", Namespace: "default", Name: "widget-0001", Operation: Update, Object: RawJSON(object1K), OldObject: RawJSON(object1K),
		User: UserInfo{Username: "admin", Groups: []string{"system:masters", "system:authenticated"}}}
	benchAdmissionResponse = &AdmissionResponse{Allowed: true, Warnings: []string{"size medium is deprecated"}}
	benchWriteRequest      = &WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "widget-0001",
		Subresource: "status", Patch: RawJSON(`{"status":{"state":"Ready"}}`)}
	benchListResponse = &ListResponse{Items: []RawJSON{RawJSON(object1K), RawJSON(object1K), RawJSON(object1K)}}
)

func benchAppend(b *testing.B, doc interface{ AppendJSON([]byte) []byte }) {
	buf := doc.AppendJSON(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = doc.AppendJSON(buf[:0])
	}
}

func benchDecode(b *testing.B, doc interface{ AppendJSON([]byte) []byte }, decode func([]byte) error) {
	in := doc.AppendJSON(nil)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	b.Run("ReconcileRequest", func(b *testing.B) { benchAppend(b, benchReconcileRequest) })
	b.Run("ReconcileResponse", func(b *testing.B) { benchAppend(b, benchReconcileResponse) })
	b.Run("AdmissionRequest", func(b *testing.B) { benchAppend(b, benchAdmissionRequest) })
	b.Run("AdmissionResponse", func(b *testing.B) { benchAppend(b, benchAdmissionResponse) })
	b.Run("WriteRequest", func(b *testing.B) { benchAppend(b, benchWriteRequest) })
	b.Run("ListResponse", func(b *testing.B) { benchAppend(b, benchListResponse) })
}

func BenchmarkDecode(b *testing.B) {
	var rr ReconcileRequest
	var rs ReconcileResponse
	var ar AdmissionRequest
	var as AdmissionResponse
	var wr WriteRequest
	var lr ListResponse
	b.Run("ReconcileRequest", func(b *testing.B) { benchDecode(b, benchReconcileRequest, rr.UnmarshalJSON) })
	b.Run("ReconcileRequest/aliased", func(b *testing.B) { benchDecode(b, benchReconcileRequest, rr.DecodeAliased) })
	b.Run("ReconcileResponse", func(b *testing.B) { benchDecode(b, benchReconcileResponse, rs.UnmarshalJSON) })
	b.Run("ReconcileResponse/owned", func(b *testing.B) { benchDecode(b, benchReconcileResponse, rs.DecodeOwned) })
	b.Run("AdmissionRequest", func(b *testing.B) { benchDecode(b, benchAdmissionRequest, ar.UnmarshalJSON) })
	b.Run("AdmissionRequest/aliased", func(b *testing.B) { benchDecode(b, benchAdmissionRequest, ar.DecodeAliased) })
	b.Run("AdmissionResponse", func(b *testing.B) { benchDecode(b, benchAdmissionResponse, as.UnmarshalJSON) })
	b.Run("WriteRequest", func(b *testing.B) { benchDecode(b, benchWriteRequest, wr.UnmarshalJSON) })
	b.Run("ListResponse", func(b *testing.B) { benchDecode(b, benchListResponse, lr.UnmarshalJSON) })
}
