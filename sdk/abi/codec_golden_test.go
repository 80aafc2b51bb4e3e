package abi

import (
	"reflect"
	"testing"
	"time"
)

// goldenDocs are documents with every member set, with none set, and with
// the members whose omission rules differ (written even when empty, written
// only without an error), next to their encoding. The encodings are the
// wire format of docs/ABI.md: a change to one is a change of the ABI.
var goldenDocs = []struct {
	name string
	in   document
	want string
}{
	{"reconcile request", &ReconcileRequest{Attempt: 3, Config: map[string]string{"z": "1", "a": "\"q\"\n"},
		Children: map[string][]RawJSON{"Secret.v1": {RawJSON(`{"b":2}`)}, "ConfigMap": {RawJSON(`{"a":1}`), nil}}, Object: RawJSON(`{"kind":"W"}`)},
		`{"attempt":3,"config":{"a":"\"q\"\n","z":"1"},"children":{"ConfigMap":[{"a":1},null],"Secret.v1":[{"b":2}]},"object":{"kind":"W"}}`},
	{"reconcile request, empty", &ReconcileRequest{}, `{}`},
	{"reconcile request, negative attempt", &ReconcileRequest{Attempt: -2}, `{"attempt":-2}`},
	{"reconcile response", &ReconcileResponse{Status: RawJSON(`{"state":"Ready"}`), Children: []RawJSON{RawJSON(`{"kind":"ConfigMap"}`), nil},
		RequeueAfter: 1500*time.Millisecond + 999*time.Microsecond, Events: []Event{{Type: "Normal", Reason: "Provisioned", Message: "ok"}, {}},
		Error: "e\u2028\xff", Terminal: true},
		`{"status":{"state":"Ready"},"children":[{"kind":"ConfigMap"},null],"requeueAfterMs":1500,"events":[{"type":"Normal","reason":"Provisioned","message":"ok"},{}],"error":"e` + "\u2028" + `\ufffd","terminal":true}`},
	{"reconcile response, empty", &ReconcileResponse{}, `{}`},
	{"reconcile response, under a millisecond", &ReconcileResponse{RequeueAfter: time.Microsecond}, `{}`},
	{"admission request", &AdmissionRequest{UID: "1", Kind: GroupVersionKind{Group: "g", Version: "v1", Kind: "K"}, Resource: "ks", Namespace: "ns",
		Name: "n", Operation: Update, DryRun: true, User: UserInfo{Username: "admin", UID: "u", Groups: []string{"a", "b\\"}},
		Config: map[string]string{"x": "y"}, OldObject: RawJSON(`{"old":1}`), Object: RawJSON(`{"new":1}`)},
		`{"uid":"1","kind":{"group":"g","version":"v1","kind":"K"},"resource":"ks","namespace":"ns","name":"n","operation":"UPDATE","dryRun":true,"userInfo":{"username":"admin","uid":"u","groups":["a","b\\"]},"config":{"x":"y"},"oldObject":{"old":1},"object":{"new":1}}`},
	{"admission request, empty", &AdmissionRequest{}, `{}`},
	{"admission request, partial kind and user", &AdmissionRequest{Kind: GroupVersionKind{Version: "v1"}, User: UserInfo{Groups: []string{"g"}}},
		`{"kind":{"version":"v1"},"userInfo":{"groups":["g"]}}`},
	{"admission response", &AdmissionResponse{Allowed: true, Message: "m", Code: 422, Patch: RawJSON(`[{"op":"add","path":"/a","value":1}]`),
		Object: RawJSON(`{"a":1}`), Warnings: []string{"w1", "w\t2"}},
		`{"allowed":true,"message":"m","code":422,"patch":[{"op":"add","path":"/a","value":1}],"object":{"a":1},"warnings":["w1","w\t2"]}`},
	{"admission response, empty", &AdmissionResponse{}, `{"allowed":false}`},
	{"finalize request", &FinalizeRequest{Attempt: 1, Config: map[string]string{"k": "v"}, Children: map[string][]RawJSON{"A": {RawJSON(`1`)}}, Object: RawJSON(`{}`)},
		`{"attempt":1,"config":{"k":"v"},"children":{"A":[1]},"object":{}}`},
	{"finalize request, empty", &FinalizeRequest{}, `{}`},
	{"finalize response", &FinalizeResponse{Done: true, RequeueAfter: 2 * time.Second, Events: []Event{{Type: "Warning", Reason: "R"}}, Error: "e", Terminal: true},
		`{"done":true,"requeueAfterMs":2000,"events":[{"type":"Warning","reason":"R"}],"error":"e","terminal":true}`},
	{"finalize response, empty", &FinalizeResponse{}, `{"done":false}`},
	{"event", &Event{Type: "Normal", Reason: "R", Message: "<m>"}, `{"type":"Normal","reason":"R","message":"<m>"}`},
	{"event, empty", &Event{}, `{}`},
	{"log", &LogRequest{Level: "info", Message: "hello", Attrs: map[string]string{"b": "2", "a": "1"}}, `{"level":"info","message":"hello","attrs":{"a":"1","b":"2"}}`},
	{"log, empty", &LogRequest{}, `{}`},
	{"get", &GetRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "n"}, `{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"n"}`},
	{"get, empty", &GetRequest{}, `{}`},
	{"get response", &GetResponse{Object: RawJSON(`{"a":1}`), Found: true, Error: "e"}, `{"object":{"a":1},"found":true,"error":"e"}`},
	{"get response, empty", &GetResponse{}, `{"found":false}`},
	{"list", &ListRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", LabelSelector: "a=b", Limit: 5},
		`{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","labelSelector":"a=b","limit":5}`},
	{"list, empty", &ListRequest{}, `{}`},
	{"list response", &ListResponse{Items: []RawJSON{RawJSON(`{}`), RawJSON(`[1]`), nil}}, `{"items":[{},[1],null]}`},
	{"list response, empty", &ListResponse{}, `{"items":[]}`},
	{"list response, error", &ListResponse{Error: "denied"}, `{"error":"denied"}`},
	{"list response, items and error", &ListResponse{Items: []RawJSON{}, Error: "denied"}, `{"items":[],"error":"denied"}`},
	{"emit event", &EmitEventRequest{Event: Event{Type: "Normal", Reason: "R", Message: "m"},
		Regarding: ObjectRef{APIVersion: "v1", Kind: "Widget", Namespace: "ns", Name: "w", UID: "u"}},
		`{"type":"Normal","reason":"R","message":"m","regarding":{"apiVersion":"v1","kind":"Widget","namespace":"ns","name":"w","uid":"u"}}`},
	{"emit event, empty", &EmitEventRequest{}, `{}`},
	{"emit event, partial regarding", &EmitEventRequest{Regarding: ObjectRef{Name: "w"}}, `{"regarding":{"name":"w"}}`},
	{"object ref", &ObjectRef{APIVersion: "v1", Kind: "K", Namespace: "ns", Name: "n", UID: "u"}, `{"apiVersion":"v1","kind":"K","namespace":"ns","name":"n","uid":"u"}`},
	{"object ref, empty", &ObjectRef{}, `{}`},
	{"host response", &HostResponse{Error: "denied"}, `{"error":"denied"}`},
	{"host response, empty", &HostResponse{}, `{}`},
	{"write request", &WriteRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", Subresource: "status", UID: "u-1",
		ResourceVersion: "42", Patch: RawJSON(`{"status":{}}`), Object: RawJSON(`{"kind":"ConfigMap"}`)},
		`{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"c","subresource":"status","uid":"u-1","resourceVersion":"42","patch":{"status":{}},"object":{"kind":"ConfigMap"}}`},
	{"write request, empty", &WriteRequest{}, `{}`},
	{"write response", &WriteResponse{Object: RawJSON(`{"a":1}`), Error: "conflict", Reason: "Conflict", Code: 409},
		`{"object":{"a":1},"error":"conflict","reason":"Conflict","code":409}`},
	{"write response, empty", &WriteResponse{}, `{}`},
	{"http request", &HTTPRequest{Method: "PUT", URL: "https://api.example.com/r/1", Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte("{\"a\":\xff}")},
		`{"method":"PUT","url":"https://api.example.com/r/1","headers":{"Content-Type":"application/json"},"body":"eyJhIjr/fQ=="}`},
	{"http request, empty", &HTTPRequest{}, `{}`},
	{"http response", &HTTPResponse{Status: 503, Headers: map[string]string{"Retry-After": "1"}, Body: []byte("busy")},
		`{"status":503,"headers":{"Retry-After":"1"},"body":"YnVzeQ=="}`},
	{"http response, error", &HTTPResponse{Error: "not granted", Reason: HTTPForbidden}, `{"error":"not granted","reason":"Forbidden"}`},
	{"http response, empty", &HTTPResponse{}, `{}`},
}

// goldenAgain is the encoding of a decoded golden document where it differs
// from the golden one: a decoded empty list is nil, and \ufffd decodes to
// U+FFFD, which is written as is.
var goldenAgain = map[string]string{
	"reconcile response":             `{"status":{"state":"Ready"},"children":[{"kind":"ConfigMap"},null],"requeueAfterMs":1500,"events":[{"type":"Normal","reason":"Provisioned","message":"ok"},{}],"error":"e` + "\u2028\ufffd" + `","terminal":true}`,
	"list response, items and error": `{"error":"denied"}`,
}

// TestGoldenEncoding pins the bytes each document encodes to, and that
// the decoder reads them back (members that encode the same, like a nil
// and an empty list, compare by their encoding).
func TestGoldenEncoding(t *testing.T) {
	for _, tt := range goldenDocs {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.in.AppendJSON(nil)); got != tt.want {
				t.Fatalf("encoding\n got %s\nwant %s", got, tt.want)
			}
			if got := string(tt.in.AppendJSON([]byte("prefix"))); got != "prefix"+tt.want {
				t.Fatalf("appending to a prefix: %s", got)
			}
			out := reflect.New(reflect.TypeOf(tt.in).Elem()).Interface().(document)
			if err := out.UnmarshalJSON([]byte(tt.want)); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			want := tt.want
			if again, ok := goldenAgain[tt.name]; ok {
				want = again
			}
			if got := string(out.AppendJSON(nil)); got != want {
				t.Fatalf("decoded and encoded again\n got %s\nwant %s", got, want)
			}
			// The aliasing decoders read the same document.
			for _, mode := range []string{"DecodeAliased", "DecodeOwned"} {
				in := reflect.New(reflect.TypeOf(tt.in).Elem())
				m := in.MethodByName(mode)
				if !m.IsValid() {
					continue
				}
				res := m.Call([]reflect.Value{reflect.ValueOf([]byte(tt.want))})
				if err, _ := res[0].Interface().(error); err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if got := string(in.Interface().(document).AppendJSON(nil)); got != want {
					t.Fatalf("%s and encoded again\n got %s\nwant %s", mode, got, want)
				}
			}
		})
	}
}
