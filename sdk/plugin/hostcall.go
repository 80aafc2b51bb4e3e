package plugin

import "github.com/setpoint-dev/setpoint/sdk/abi"

// HostFunc names one host function of the ABI (docs/ABI.md).
type HostFunc int

// The host functions.
const (
	HostLog HostFunc = iota
	HostGet
	HostList
	HostEmitEvent
	// The write host functions (ABI 1.1); see Writer.
	HostCreate
	HostUpdate
	HostPatch
	HostDelete
	// HostHTTP calls the outside world over HTTP (ABI 1.2); see HTTPDoer.
	HostHTTP
)

// CallHost sends the request document req to the host function fn and returns
// its response document. Each guest ABI (sdk/guest, sdk/extism) provides one;
// it may reuse the returned slice on the next call.
type CallHost func(fn HostFunc, req []byte) []byte

// NewHost returns the Host that encodes each request, sends it with call and
// decodes the answer. A guest runs one call at a time, so the Host reuses one
// request buffer and is not safe for concurrent use.
func NewHost(call CallHost) Host { return &callHost{call: call} }

type callHost struct {
	call CallHost
	buf  []byte // request documents, reused across calls
}

func (h *callHost) Log(level, msg string, attrs ...string) {
	r := abi.LogRequest{Level: level, Message: msg}
	if len(attrs) > 0 {
		r.Attrs = make(map[string]string, len(attrs)/2)
		for i := 0; i+1 < len(attrs); i += 2 {
			r.Attrs[attrs[i]] = attrs[i+1]
		}
	}
	h.buf = r.AppendJSON(h.buf[:0])
	h.call(HostLog, h.buf)
}

func (h *callHost) Get(req abi.GetRequest) (abi.RawJSON, bool, error) {
	h.buf = req.AppendJSON(h.buf[:0])
	var resp abi.GetResponse
	if err := resp.UnmarshalJSON(h.call(HostGet, h.buf)); err != nil {
		return nil, false, err
	}
	if resp.Error != "" {
		return nil, false, hostError(resp.Error)
	}
	return resp.Object, resp.Found, nil
}

func (h *callHost) List(req abi.ListRequest) ([]abi.RawJSON, error) {
	h.buf = req.AppendJSON(h.buf[:0])
	var resp abi.ListResponse
	if err := resp.UnmarshalJSON(h.call(HostList, h.buf)); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, hostError(resp.Error)
	}
	return resp.Items, nil
}

func (h *callHost) EmitEvent(ev abi.EmitEventRequest) error {
	h.buf = ev.AppendJSON(h.buf[:0])
	var resp abi.HostResponse
	if err := resp.UnmarshalJSON(h.call(HostEmitEvent, h.buf)); err != nil {
		return err
	}
	if resp.Error != "" {
		return hostError(resp.Error)
	}
	return nil
}

// hostError is an error the host returned for a host call (a denied
// permission, an exhausted budget, a failed read).
type hostError string

func (e hostError) Error() string { return string(e) }
