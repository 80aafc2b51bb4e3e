package plugin

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestHTTP checks what HTTP sends to the http host function and how it reads
// each kind of answer: a response of any status, a denial, a transport
// failure.
func TestHTTP(t *testing.T) {
	var gotFn HostFunc
	var gotReq string
	answer := ""
	h := NewHost(func(fn HostFunc, req []byte) []byte {
		gotFn, gotReq = fn, string(req)
		return []byte(answer)
	})
	tests := []struct {
		name      string
		answer    string
		status    int32
		body      string
		reason    string
		forbidden bool
	}{
		{name: "ok", answer: `{"status":200,"headers":{"Etag":"x"},"body":"aGk="}`, status: 200, body: "hi"},
		{name: "server error is a response", answer: `{"status":500}`, status: 500},
		{name: "not granted", answer: `{"error":"egress to https://x.example.com:443 (PUT) is not granted","reason":"Forbidden"}`,
			reason: abi.HTTPForbidden, forbidden: true},
		{name: "timeout", answer: `{"error":"timeout","reason":"Timeout"}`, reason: abi.HTTPTimeout},
		{name: "error without a reason", answer: `{"error":"refused"}`, reason: abi.HTTPUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer = tt.answer
			resp, err := HTTP(h, abi.HTTPRequest{Method: "PUT", URL: "https://x.example.com/r", Body: []byte("b")})
			if gotFn != HostHTTP || !strings.Contains(gotReq, `"url":"https://x.example.com/r"`) || !strings.Contains(gotReq, `"body":"Yg=="`) {
				t.Errorf("sent %v %s", gotFn, gotReq)
			}
			if tt.reason == "" {
				if err != nil || resp.Status != tt.status || string(resp.Body) != tt.body {
					t.Errorf("HTTP = %+v, %v; want status %d body %q", resp, err, tt.status, tt.body)
				}
				return
			}
			if err == nil || ReasonOf(err) != tt.reason || IsForbidden(err) != tt.forbidden {
				t.Errorf("HTTP error = %v (reason %q, forbidden %v); want reason %q", err, ReasonOf(err), IsForbidden(err), tt.reason)
			}
		})
	}
}
