// Package widget is the reconcile logic of the Widget (DESIGN.md's running
// example) used by the plugin benchmarks and the host tests: it reads
// spec.name and spec.size, reports status and desires one ConfigMap child.
// The same source runs natively and inside the Wasm guests, so the
// benchmark compares like with like.
package widget

import (
	"errors"
	"strconv"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// ErrInvalidSize reports a spec.size outside small, medium and large.
var ErrInvalidSize = errors.New("spec.size must be small, medium or large")

// buffers reused across calls: a guest serves one call at a time.
var statusBuf, childBuf []byte

// Reconcile provisions one ConfigMap per widget and reports its state.
func Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	obj := req.Object
	name := obj.String("metadata", "name")
	size := obj.String("spec", "size")
	var replicas int64
	switch size {
	case "small":
		replicas = 1
	case "medium":
		replicas = 3
	case "large":
		replicas = 5
	default:
		return nil, plugin.Terminal(ErrInvalidSize)
	}
	if req.Config["log"] == "true" {
		h.Log("info", "reconciling widget", "size", size)
	}
	child := abi.NewObject(childBuf).
		Str("apiVersion", "v1").
		Str("kind", "ConfigMap").
		Object("metadata", func(m *abi.Object) {
			m.Str("name", name+"-config").Str("namespace", obj.String("metadata", "namespace"))
		}).
		Object("data", func(d *abi.Object) {
			d.Str("name", obj.String("spec", "name")).Str("size", size).Str("replicas", strconv.FormatInt(replicas, 10))
		}).Bytes()
	childBuf = child
	state := "Provisioning"
	if len(req.Children["ConfigMap"]) > 0 {
		state = "Ready"
	}
	status := abi.NewObject(statusBuf).
		Str("state", state).
		Int("replicas", replicas).
		Str("lastProvisioned", obj.String("metadata", "creationTimestamp")).Bytes()
	statusBuf = status
	return &abi.ReconcileResponse{Status: status, Children: []abi.RawJSON{child}}, nil
}
