package plugintest

import (
	"fmt"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

var _ plugin.HTTPDoer = (*Host)(nil)

// HTTPEntry is one recorded HTTP call and its outcome.
type HTTPEntry struct {
	Request  abi.HTTPRequest
	Response abi.HTTPResponse
	Err      error
}

// HTTP implements plugin.HTTPDoer: it answers with HTTPHandler, recording
// the call in Requests. Without a handler every call is refused as the
// server refuses a call its Plugin's spec.egress does not grant.
func (h *Host) HTTP(req abi.HTTPRequest) (abi.HTTPResponse, error) {
	h.mu.Lock()
	handler := h.HTTPHandler
	h.mu.Unlock()
	var resp abi.HTTPResponse
	var err error
	if handler == nil {
		err = &plugin.HTTPError{Reason: abi.HTTPForbidden, Message: fmt.Sprintf("egress to %s (%s) is not granted: plugintest.Host has no HTTPHandler", req.URL, req.Method)}
	} else {
		resp, err = handler(req)
	}
	h.mu.Lock()
	h.Requests = append(h.Requests, HTTPEntry{Request: req, Response: resp, Err: err})
	h.mu.Unlock()
	return resp, err
}
