package plugin

import "github.com/setpoint-dev/setpoint/sdk/abi"

// HTTPDoer is a Host that calls the outside world through the http host
// function (ABI 1.2). The Hosts of sdk/guest, sdk/extism and sdk/plugintest
// implement it; handlers use it through HTTP.
//
// The host sends a request only when the Plugin's spec.egress.allow grants
// its scheme, host, port and method, never to loopback, link-local or
// unspecified addresses unless a grant names that address, and follows
// redirects only to granted URLs.
type HTTPDoer interface {
	// HTTP sends req and returns the response, whatever its status; an
	// error means there is no response, an *HTTPError.
	HTTP(req abi.HTTPRequest) (abi.HTTPResponse, error)
}

// HTTPError is an HTTP call that got no response: Reason is one of abi's
// HTTP reasons (abi.HTTPForbidden for a call the Plugin's spec.egress does
// not grant, abi.HTTPTimeout, abi.HTTPTooLarge, abi.HTTPTLS,
// abi.HTTPUnavailable, abi.HTTPBadRequest) and Message names the cause.
type HTTPError struct {
	Reason  string
	Message string
}

func (e *HTTPError) Error() string { return e.Message }

// HTTP sends req through the host's http host function. A response with any
// status, 4xx and 5xx included, is a response and no error. A request the
// Plugin's spec.egress does not grant fails with an error for which
// IsForbidden is true and whose message names the grant to add; a timeout,
// a refused connection, a certificate that does not verify or a body over
// the size cap fail with an *HTTPError naming the cause.
func HTTP(h Host, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	d, ok := h.(HTTPDoer)
	if !ok {
		return abi.HTTPResponse{}, &HTTPError{Reason: abi.HTTPForbidden, Message: "plugin: this host makes no HTTP calls"}
	}
	return d.HTTP(req)
}

// HTTP implements HTTPDoer.
func (h *callHost) HTTP(req abi.HTTPRequest) (abi.HTTPResponse, error) {
	h.buf = req.AppendJSON(h.buf[:0])
	var resp abi.HTTPResponse
	if err := resp.UnmarshalJSON(h.call(HostHTTP, h.buf)); err != nil {
		return abi.HTTPResponse{}, err
	}
	if resp.Error != "" || resp.Reason != "" {
		reason := resp.Reason
		if reason == "" {
			reason = abi.HTTPUnavailable
		}
		return abi.HTTPResponse{}, &HTTPError{Reason: reason, Message: resp.Error}
	}
	return resp, nil
}
