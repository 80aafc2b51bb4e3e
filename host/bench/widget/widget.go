// Package widget is the reconcile logic of the Widget (DESIGN.md's running
// example) used by the plugin benchmarks and the host tests: it reads
// spec.name and spec.size, reports status and desires one ConfigMap child.
// The same source runs natively and inside the Wasm guests, so the
// benchmark compares like with like.
package widget

import (
	"errors"
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// ErrInvalidSize reports a spec.size outside small, medium and large.
var ErrInvalidSize = errors.New("spec.size must be small, medium or large")

// State reused across calls: a guest serves one call at a time. Reuse is
// what keeps a Wasm call cheap, since every allocation and loop costs more
// inside the guest than natively.
var (
	statusBuf, childBuf, nameBuf []byte
	resp                         abi.ReconcileResponse
	children                     = make([]abi.RawJSON, 1)
)

// Reconcile provisions one ConfigMap per widget and reports its state.
// It is not safe for concurrent use; the response is valid until the next
// call.
func Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	// Look the two sub-objects up once, then read fields inside them: each
	// lookup scans, and scanning costs more in a guest than natively.
	meta, _ := req.Object.Get("metadata")
	spec, _ := req.Object.Get("spec")
	// View does not copy: the values go into the response right away.
	name := meta.View("name")
	size := spec.View("size")
	var replicas int64
	var count string
	switch size {
	case "small":
		replicas, count = 1, "1"
	case "medium":
		replicas, count = 3, "3"
	case "large":
		replicas, count = 5, "5"
	default:
		return nil, plugin.Terminal(ErrInvalidSize)
	}
	if req.Config["log"] == "true" {
		h.Log("info", "reconciling widget", "size", size)
	}
	nameBuf = append(append(nameBuf[:0], name...), "-config"...)
	var o abi.Object
	o.Reset(childBuf)
	o.Str("apiVersion", "v1").
		Str("kind", "ConfigMap").
		Object("metadata", func(m *abi.Object) {
			m.Str("name", unsafe.String(unsafe.SliceData(nameBuf), len(nameBuf))).
				Str("namespace", meta.View("namespace"))
		}).
		Object("data", func(d *abi.Object) {
			d.Str("name", spec.View("name")).Str("size", size).Str("replicas", count)
		})
	childBuf = o.Bytes()
	state := "Provisioning"
	if len(req.Children["ConfigMap"]) > 0 {
		state = "Ready"
	}
	o.Reset(statusBuf)
	o.Str("state", state).
		Int("replicas", replicas).
		Str("lastProvisioned", meta.View("creationTimestamp"))
	statusBuf = o.Bytes()
	children[0] = childBuf
	resp = abi.ReconcileResponse{Status: statusBuf, Children: children}
	return &resp, nil
}
