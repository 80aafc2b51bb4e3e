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
	// Reuse makes Reconcile build every response in one buffer kept across
	// calls, so that a call allocates nothing: a response is then valid
	// only until the next call. The Wasm guest (examples/widget/plugin)
	// sets it, since a guest serves one call at a time and the SDK encodes
	// each response before the next call; concurrent callers must not.
	Reuse bool
	reply *reply
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

// Members of the widget and of its provision that Reconcile reads, each
// looked up in one pass over the object (abi.RawJSON.Fields).
var (
	widgetMembers = []string{"metadata", "spec", "status"}
	metaMembers   = []string{"name", "namespace"}
	specMembers   = []string{"size", "name"}
	statusMembers = []string{"capacity", "lastProvisioned"}
	childSpec     = []string{"size", "capacity"}
)

// reply is a response with room for its one child and the encoded status
// and child, allocated once per call (or once, with Reuse): inside a Wasm
// guest each allocation costs several times what it costs natively.
type reply struct {
	resp     abi.ReconcileResponse
	children [1]abi.RawJSON
	buf      [512]byte
}

// Reconcile desires the widget's WidgetProvision (same name and namespace)
// and reports status: state Ready once the observed provision matches the
// spec, Provisioning before; capacity and lastProvisioned change only when a
// new capacity has been provisioned, so a steady widget's status is stable
// and the engine writes nothing.
//
// It reads each member of the request once and builds the response in one
// buffer: this runs inside a Wasm guest, where every scan, call and
// allocation costs several times the native figure.
func (op *Operator) Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	var top, meta, spec, status [3]abi.RawJSON
	req.Object.Fields(widgetMembers, top[:])
	top[0].Fields(metaMembers, meta[:])
	top[1].Fields(specMembers, spec[:])
	// View does not copy: the strings alias the request, which outlives the
	// handler's use of them (they are written into the response below).
	name := meta[0].View()
	size := spec[0].View()
	capacity, ok := Capacity(size)
	if !ok {
		return nil, plugin.Terminal(fmt.Errorf("%w, not %q", ErrInvalidSize, size))
	}
	r := op.reply
	if r == nil || !op.Reuse {
		r = new(reply)
		if op.Reuse {
			op.reply = r
		}
	}
	var o abi.Object
	o.Reset(r.buf[:0])
	o.Str("apiVersion", ChildAPIVersion).
		Str("kind", ChildKind).
		Begin("metadata").
		Str("name", name).Str("namespace", meta[1].View()).
		Begin("labels").Str("example.setpoint.dev/widget", name).End().
		End().
		Begin("spec").
		Str("widget", spec[1].View()).Str("size", size).Int("capacity", capacity).
		End()
	child := o.Bytes()
	// The status follows the child in the same buffer; the child's slice is
	// capped at its length so that appending to the status cannot touch it.
	rest := child[len(child):len(child)]
	child = child[:len(child):len(child)]

	state := StateProvisioning
	top[2].Fields(statusMembers, status[:])
	prevCapacity := status[0].Int()
	last := status[1].View()
	var c, cs [2]abi.RawJSON
	for _, obj := range req.Children[ChildKey] {
		obj.Fields(widgetMembers[:2], c[:])
		c[1].Fields(childSpec, cs[:])
		if c[0].View("name") == name && cs[0].View() == size && cs[1].Int() == capacity {
			state = StateReady
		}
	}
	// stamp: the provision is observed for the first time at this
	// capacity, and lastProvisioned becomes the current time (written by
	// Object.Time, which allocates nothing).
	stamp := state == StateReady && (last == "" || prevCapacity != capacity)
	if stamp {
		prevCapacity = capacity
		if req.Config["log"] == "true" {
			h.Log("info", "widget provisioned", "capacity", strconv.FormatInt(capacity, 10))
		}
	}
	o.Reset(rest)
	o.Str("state", state).Str("provision", name)
	if prevCapacity != 0 {
		o.Int("capacity", prevCapacity)
	}
	if stamp {
		o.Time("lastProvisioned", op.now())
	} else if last != "" {
		o.Str("lastProvisioned", last)
	}
	r.children[0] = child
	// No recheck while Provisioning: the provision's own change reconciles
	// the widget again, and the engine writes the status it computes even
	// when its cache has not yet seen the previous one.
	r.resp = abi.ReconcileResponse{Status: o.Bytes(), Children: r.children[:]}
	return &r.resp, nil
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
