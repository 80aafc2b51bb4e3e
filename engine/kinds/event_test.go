package kinds

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func eventObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestEventValidation restates kube-apiserver's validation of Events
// written through core/v1: each case is one of its acceptances or
// refusals (the messages as kubectl printed them against v1.34).
func TestEventValidation(t *testing.T) {
	k := kindOf(t, EventResource)
	const head = `{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default", "resourceVersion": "1"}, `
	tests := []struct {
		name, body, want string
	}{
		{"involved object in the namespace", `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"}, "reason": "R"}`, ""},
		{"cluster-scoped object in default", `"involvedObject": {"kind": "Namespace", "name": "n"}}`, ""},
		{"involved object elsewhere", `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "other"}}`,
			`involvedObject.namespace: Invalid value: "other": does not match event.namespace`},
		{"new-style event without its reporter", `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"}, "eventTime": "2026-11-27T01:00:00.000000Z", "type": "Bogus"}`,
			`[reportingComponent: Required value, reportingComponent: Invalid value: "": name part must be non-empty, ` +
				`reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), ` +
				`reportingInstance: Required value, action: Required value, reason: Required value]`},
		{"new-style event", `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"}, "eventTime": "2026-11-27T01:00:00.000000Z", ` +
			`"reportingComponent": "setpoint/widget", "reportingInstance": "h", "action": "Reconcile", "reason": "R"}`, ""},
	}
	for _, tc := range tests {
		obj := eventObject(t, head+tc.body)
		got := ""
		if errs := k.ValidateCreate(context.Background(), obj); len(errs) > 0 {
			got = errorsText(errs)
		}
		if got != tc.want {
			t.Errorf("%s: create\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if errs := k.ValidateUpdate(context.Background(), "", obj, obj.DeepCopy()); (len(errs) > 0) != (tc.want != "") {
			t.Errorf("%s: update: %v", tc.name, errs)
		}
	}
}

// TestEventNameValidation: kube-apiserver validates a core/v1 Event's
// fields first and its metadata only when they pass, taking any name
// that is a path segment; through events.k8s.io/v1 the name must be a DNS
// subdomain, and its error follows the legacy rules' and precedes the
// newer API's own.
func TestEventNameValidation(t *testing.T) {
	core, v1 := kindOf(t, EventResource), kindOf(t, EventsV1Resource)
	event := func(name, body string) *unstructured.Unstructured {
		return eventObject(t, `{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "`+name+`", "namespace": "default"}, `+body)
	}
	v1Event := func(name, body string) *unstructured.Unstructured {
		return eventObject(t, `{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "`+name+`", "namespace": "default"}, `+body)
	}
	const elsewhere = `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "other"}}`
	const good = `"involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"}}`
	const v1Body = `"regarding": {"kind": "ConfigMap", "name": "c"}, "eventTime": "2026-11-27T01:00:00.000000Z", ` +
		`"reportingController": "a b", "reportingInstance": "i", "action": "A", "reason": "R", "type": "Odd"}`
	for _, tc := range []struct {
		name string
		k    *Kind
		obj  *unstructured.Unstructured
		want string
	}{
		{"core: any path segment", core, event("Pod_X.1", good), ""},
		{"core: not a path segment", core, event("a%b", good), `metadata.name: Invalid value: "a%b": may not contain '%'`},
		{"core: fields before metadata", core, event("a%b", elsewhere), `involvedObject.namespace: Invalid value: "other": does not match event.namespace`},
		{"events.k8s.io/v1: DNS subdomain, between the rules", v1, v1Event("Pod_X", v1Body),
			`[reportingController: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), ` +
				`metadata.name: Invalid value: "Pod_X": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), ` +
				`type: Invalid value: "": has invalid value: Odd]`},
	} {
		got := ""
		if errs := tc.k.ValidateCreate(context.Background(), tc.obj); len(errs) > 0 {
			got = errorsText(errs)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestEventNameValidationUpdate: on update kube-apiserver checks an
// Event's name only as any object's, a path segment, through either API:
// an Event a client named as core/v1 allows may be updated through
// events.k8s.io/v1 too.
func TestEventNameValidationUpdate(t *testing.T) {
	const body = `"regarding": {"kind": "ConfigMap", "name": "c"}, "eventTime": "2026-11-27T01:00:00.000000Z", ` +
		`"reportingController": "example.com/ctl", "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal"}`
	for _, tc := range []struct{ name, want string }{
		{"Pod_X.1", ""},
		{"a%b", `metadata.name: Invalid value: "a%b": may not contain '%'`},
	} {
		old := eventObject(t, `{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "`+tc.name+`", "namespace": "default", "resourceVersion": "7"}, `+body)
		obj := old.DeepCopy()
		got := ""
		if errs := kindOf(t, EventsV1Resource).ValidateUpdate(context.Background(), "", obj, old); len(errs) > 0 {
			got = errorsText(errs)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestEventEncoding: an Event is stored as corev1.Event encodes it, as
// kube-apiserver stores it: the fields without omitempty present when
// unset, a timestamp in UTC, metadata untouched; Coerce gives that shape
// from the decoding that finds unknown fields. One that does not decode is
// refused and left as it was.
func TestEventEncoding(t *testing.T) {
	k := kindOf(t, EventResource)
	obj := eventObject(t, `{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default", "labels": {"a": "b"}},
		"involvedObject": {"kind": "ConfigMap", "name": "c"}, "reason": "R", "count": 2,
		"firstTimestamp": "2026-11-27T02:00:00+01:00"}`)
	if _, err := k.Coerce(obj); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(obj.Object)
	const want = `{"apiVersion":"v1","count":2,"eventTime":null,"firstTimestamp":"2026-11-27T01:00:00Z",` +
		`"involvedObject":{"kind":"ConfigMap","name":"c"},"kind":"Event","lastTimestamp":null,` +
		`"metadata":{"labels":{"a":"b"},"name":"e","namespace":"default"},"reason":"R",` +
		`"reportingComponent":"","reportingInstance":"","source":{}}`
	if string(got) != want {
		t.Errorf("coerced\n got %s\nwant %s", got, want)
	}
	again := obj.DeepCopy()
	delete(again.Object, "source")
	if _, err := k.Coerce(again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Object, obj.Object) {
		t.Errorf("coerced again: %v, want %v", again.Object, obj.Object)
	}

	bad := eventObject(t, `{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "count": "x"}`)
	if _, err := k.Coerce(bad); err == nil {
		t.Error("an Event whose count is a string was coerced")
	}
	if got, _ := json.Marshal(bad.Object); string(got) != `{"apiVersion":"v1","count":"x","kind":"Event","metadata":{"name":"e"}}` {
		t.Errorf("undecodable event changed: %s", got)
	}
}
