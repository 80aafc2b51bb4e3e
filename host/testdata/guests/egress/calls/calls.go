// Package calls is the logic of the host tests' egress guests: each
// reconcile makes the HTTP call its config describes through plugin.HTTP
// and reports the outcome in the status.
//
// Config: url, method (default GET), body, header ("Name: value"), and
// times (calls to make, default 1; the status reports the last).
// Status: status, body, contentType, and on an error error, reason and
// forbidden (plugin.IsForbidden).
package calls

import (
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Handlers are the guests' handlers.
var Handlers = plugin.Handlers{Reconcile: Reconcile, Admit: admit}

// Reconcile makes the call the config describes.
func Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return &abi.ReconcileResponse{Status: call(h, req.Config)}, nil
}

// admit makes the call during admission and allows the request, reporting
// the outcome in the response's message.
func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return &abi.AdmissionResponse{Allowed: true, Message: string(call(h, req.Config))}, nil
}

func call(h plugin.Host, config map[string]string) abi.RawJSON {
	r := abi.HTTPRequest{Method: config["method"], URL: config["url"]}
	if b := config["body"]; b != "" {
		r.Body = []byte(b)
	}
	if hv := config["header"]; hv != "" {
		k, v, _ := strings.Cut(hv, ": ")
		r.Headers = map[string]string{k: v}
	}
	times, _ := strconv.Atoi(config["times"])
	times = max(times, 1)
	var resp abi.HTTPResponse
	var err error
	for range times {
		resp, err = plugin.HTTP(h, r)
	}
	st := abi.NewObject(nil)
	if err != nil {
		return st.Str("error", err.Error()).Str("reason", plugin.ReasonOf(err)).Bool("forbidden", plugin.IsForbidden(err)).Bytes()
	}
	return st.Int("status", int64(resp.Status)).Str("body", string(resp.Body)).Str("contentType", resp.Headers["Content-Type"]).Bytes()
}
