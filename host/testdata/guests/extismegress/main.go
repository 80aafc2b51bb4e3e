// Command extismegress is the host tests' Extism-ABI guest that calls the
// outside world two ways: with config "kit" set to "extism", through
// Extism's own http_request, http_status_code and http_headers (what Extism
// plugin kits' HTTP helpers call); otherwise through the SDK's http host
// function (package calls). The Extism path reports status, body and
// contentType like package calls; a denied call traps, as in Extism.
package main

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/host/testdata/guests/egress/calls"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/extism"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

//go:wasmimport extism:host/env alloc
func kalloc(n uint64) uint64

//go:wasmimport extism:host/env length
func klength(offs uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offs uint64, v uint32)

//go:wasmimport extism:host/env load_u8
func loadU8(offs uint64) uint32

//go:wasmimport extism:host/env http_request
func httpRequest(req, body uint64) uint64

//go:wasmimport extism:host/env http_status_code
func httpStatusCode() int32

//go:wasmimport extism:host/env http_headers
func httpHeaders() uint64

// put copies b into a new kernel block.
func put(b []byte) uint64 {
	offs := kalloc(uint64(len(b)))
	for i := range b {
		storeU8(offs+uint64(i), uint32(b[i]))
	}
	return offs
}

// get copies the kernel block at offs out; 0 is "absent".
func get(offs uint64) []byte {
	if offs == 0 {
		return nil
	}
	b := make([]byte, klength(offs))
	for i := range b {
		b[i] = byte(loadU8(offs + uint64(i)))
	}
	return b
}

func init() {
	extism.Register(plugin.Handlers{Reconcile: reconcile})
}

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	if req.Config["kit"] != "extism" {
		return calls.Reconcile(h, req)
	}
	// The request document of Extism's http_request.
	doc, _ := json.Marshal(map[string]any{"url": req.Config["url"], "method": req.Config["method"], "headers": map[string]string{}})
	var body uint64
	if b := req.Config["body"]; b != "" {
		body = put([]byte(b))
	}
	out := get(httpRequest(put(doc), body))
	var headers map[string]string
	_ = json.Unmarshal(get(httpHeaders()), &headers)
	st := abi.NewObject(nil).Int("status", int64(httpStatusCode())).Str("body", string(out)).Str("contentType", headers["content-type"])
	return &abi.ReconcileResponse{Status: st.Bytes()}, nil
}

func main() {}
