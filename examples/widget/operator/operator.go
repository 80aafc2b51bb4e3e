// Package operator is the logic of the Widget plugin (examples/widget/plugin):
// for each Widget it desires one WidgetProvision child that carries the
// widget's size and capacity, reports the widget's state, and on deletion
// records that the provision was released. It is plain Go on the SDK's
// types, so it is unit-tested natively; the plugin's main package only
// registers it with the native-ABI glue.
package operator

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Kinds, as the reconcile request keys the children and as the child is
// written.
const (
	ChildAPIVersion = "example.setpoint.dev/v1"
	ChildKind       = "WidgetProvision"
	// ChildKey is how a ReconcileRequest lists the children of ChildKind.
	ChildKey = ChildKind + ".example.setpoint.dev"
)

// States a widget reports in status.state.
const (
	StateProvisioning = "Provisioning"
	StateReady        = "Ready"
)

// ErrInvalidSize reports a spec.size other than small, medium or large. The
// kind's schema already refuses one; the plugin does not trust that.
var ErrInvalidSize = errors.New("spec.size must be small, medium or large")

// Capacity is the provisioned capacity of each size, in units.
func Capacity(size string) (int64, bool) {
	switch size {
	case "small":
		return 1, true
	case "medium":
		return 4, true
	case "large":
		return 16, true
	}
	return 0, false
}

// Operator holds the plugin's handlers. Now is its clock (time.Now when
// nil), injected so tests see fixed timestamps.
type Operator struct {
	Now func() time.Time
}

// Handlers returns the handlers to register with the SDK's glue.
func (op *Operator) Handlers() plugin.Handlers {
	return plugin.Handlers{Reconcile: op.Reconcile, Finalize: op.Finalize}
}

func (op *Operator) now() time.Time {
	if op.Now != nil {
		return op.Now()
	}
	return time.Now()
}

// Reconcile desires the widget's WidgetProvision (same name and namespace)
// and reports status: state Ready once the observed provision matches the
// spec, Provisioning before; capacity and lastProvisioned change only when a
// new capacity has been provisioned, so a steady widget's status is stable
// and the engine writes nothing.
func (op *Operator) Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	obj := req.Object
	name := obj.String("metadata", "name")
	size := obj.String("spec", "size")
	capacity, ok := Capacity(size)
	if !ok {
		return nil, plugin.Terminal(fmt.Errorf("%w, not %q", ErrInvalidSize, size))
	}
	child := abi.NewObject(nil).
		Str("apiVersion", ChildAPIVersion).
		Str("kind", ChildKind).
		Object("metadata", func(m *abi.Object) {
			m.Str("name", name).Str("namespace", obj.String("metadata", "namespace")).
				StrMap("labels", map[string]string{"example.setpoint.dev/widget": name})
		}).
		Object("spec", func(s *abi.Object) {
			s.Str("widget", obj.String("spec", "name")).Str("size", size).Int("capacity", capacity)
		}).Bytes()

	state := StateProvisioning
	prevCapacity := obj.Int("status", "capacity")
	last := obj.String("status", "lastProvisioned")
	for _, c := range req.Children[ChildKey] {
		if c.String("metadata", "name") == name && c.String("spec", "size") == size && c.Int("spec", "capacity") == capacity {
			state = StateReady
		}
	}
	if state == StateReady && (last == "" || prevCapacity != capacity) {
		last = op.now().UTC().Format(time.RFC3339)
		prevCapacity = capacity
		if req.Config["log"] == "true" {
			h.Log("info", "widget provisioned", "capacity", strconv.FormatInt(capacity, 10))
		}
	}
	status := abi.NewObject(nil).Str("state", state).Str("provision", name)
	if prevCapacity != 0 {
		status.Int("capacity", prevCapacity)
	}
	if last != "" {
		status.Str("lastProvisioned", last)
	}
	// No recheck while Provisioning: the provision's own change reconciles
	// the widget again, and the engine writes the status it computes even
	// when its cache has not yet seen the previous one.
	return &abi.ReconcileResponse{Status: status.Bytes(), Children: []abi.RawJSON{child}}, nil
}

// Finalize runs while a widget is being deleted: it releases the widget's
// provision by recording a Deprovisioned event on the widget with the
// capacity that was given back, then lets the deletion finish. The
// WidgetProvision itself is garbage-collected through its ownerReference.
func (op *Operator) Finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	name := req.Object.String("metadata", "name")
	var released int64
	for _, c := range req.Children[ChildKey] {
		released += c.Int("spec", "capacity")
	}
	msg := fmt.Sprintf("widget %s released %d capacity units", name, released)
	return &abi.FinalizeResponse{
		Done:   true,
		Events: []abi.Event{{Type: "Normal", Reason: "Deprovisioned", Message: msg}},
	}, nil
}
