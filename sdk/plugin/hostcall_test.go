package plugin

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestNewHost checks the Host both guest ABIs share: what each method sends to
// which host function, and how it reads the answers.
func TestNewHost(t *testing.T) {
	var gotFn HostFunc
	var gotReq string
	answer := ""
	h := NewHost(func(fn HostFunc, req []byte) []byte {
		gotFn, gotReq = fn, string(req)
		return []byte(answer)
	})

	h.Log("info", "hello", "k", "v")
	if gotFn != HostLog || !strings.Contains(gotReq, `"hello"`) || !strings.Contains(gotReq, `"k":"v"`) {
		t.Errorf("Log sent %v %s", gotFn, gotReq)
	}

	answer = `{"found":true,"object":{"kind":"Widget"}}`
	obj, found, err := h.Get(abi.GetRequest{Name: "w"})
	if err != nil || !found || !strings.Contains(string(obj), "Widget") || gotFn != HostGet || !strings.Contains(gotReq, `"w"`) {
		t.Errorf("Get = %s, %v, %v (sent %v %s)", obj, found, err, gotFn, gotReq)
	}

	answer = `{"error":"permission denied: widgets"}`
	if _, _, err := h.Get(abi.GetRequest{Name: "w"}); err == nil || err.Error() != "permission denied: widgets" {
		t.Errorf("Get with a host error = %v", err)
	}
	if _, err := h.List(abi.ListRequest{}); err == nil || gotFn != HostList {
		t.Errorf("List with a host error = %v (sent to %v)", err, gotFn)
	}
	if err := h.EmitEvent(abi.EmitEventRequest{Event: abi.Event{Reason: "R"}}); err == nil || gotFn != HostEmitEvent {
		t.Errorf("EmitEvent with a host error = %v (sent to %v)", err, gotFn)
	}

	answer = `{"items":[{"a":1},{"a":2}]}`
	items, err := h.List(abi.ListRequest{})
	if err != nil || len(items) != 2 {
		t.Errorf("List = %s, %v", items, err)
	}

	answer = `not json`
	if _, _, err := h.Get(abi.GetRequest{Name: "w"}); err == nil {
		t.Error("Get accepted a malformed answer")
	}
	answer = `{}`
	if err := h.EmitEvent(abi.EmitEventRequest{Event: abi.Event{Reason: "R"}}); err != nil || !strings.Contains(gotReq, `"R"`) {
		t.Errorf("EmitEvent = %v (sent %s)", err, gotReq)
	}
}
