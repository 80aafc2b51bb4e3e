// Package operator is the logic of the ReplicaGroup plugin
// (examples/replicagroup/plugin): a group desires spec.replicas Replica
// children named GROUP-0 ... GROUP-(n-1), so the engine creates the missing
// ones when the group scales up and deletes the extra ones when it scales
// down. It is plain Go on the SDK's types, unit-tested natively.
package operator

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// The children's kind.
const (
	ChildAPIVersion = "example.setpoint.dev/v1"
	ChildKind       = "Replica"
	// ChildKey is how a ReconcileRequest lists the children of ChildKind.
	ChildKey = ChildKind + ".example.setpoint.dev"
)

// States a group reports in status.state.
const (
	StateScaling = "Scaling"
	StateReady   = "Ready"
	// StateFailed is reported while the group cannot be reconciled; the
	// reason is in its Ready condition.
	StateFailed = "Failed"
)

// DefaultMaxReplicas bounds a group when the plugin's config sets no
// maxReplicas.
const DefaultMaxReplicas = 50

var (
	// ErrTooManyReplicas reports a spec.replicas above the plugin's
	// maxReplicas. It is not terminal: the limit is the plugin's config,
	// which may be raised, so the engine keeps retrying with backoff.
	ErrTooManyReplicas = errors.New("too many replicas")
	// ErrInvalidReplicas reports a negative or missing spec.replicas.
	ErrInvalidReplicas = errors.New("spec.replicas must be a non-negative integer")
)

// Handlers returns the handlers to register with the SDK's glue.
func Handlers() plugin.Handlers { return plugin.Handlers{Reconcile: Reconcile} }

// ChildName is the name of a group's replica at index i.
func ChildName(group string, i int) string { return group + "-" + strconv.Itoa(i) }

// Reconcile desires the group's replicas and reports how many of them it
// observes up to date.
func Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	resp, err := reconcile(req)
	if err != nil {
		// Say so in status.state too, which kubectl shows, with the
		// replicas that exist; the engine keeps the children as they are.
		status := abi.NewObject(nil).Int("replicas", int64(len(req.Children[ChildKey]))).Str("state", StateFailed).Bytes()
		return &abi.ReconcileResponse{Status: status}, err
	}
	return resp, nil
}

func reconcile(req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	obj := req.Object
	if !obj.Has("spec", "replicas") || obj.Int("spec", "replicas") < 0 {
		return nil, plugin.Terminal(ErrInvalidReplicas)
	}
	want := int(obj.Int("spec", "replicas"))
	limit := DefaultMaxReplicas
	if v, ok := req.Config["maxReplicas"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, plugin.Terminal(fmt.Errorf("config maxReplicas %q is not a non-negative integer", v))
		}
		limit = n
	}
	if want > limit {
		return nil, fmt.Errorf("%w: spec.replicas is %d, the plugin's maxReplicas is %d", ErrTooManyReplicas, want, limit)
	}
	group := obj.String("metadata", "name")
	ns := obj.String("metadata", "namespace")
	message := obj.String("spec", "message")

	children := make([]abi.RawJSON, want)
	for i := range want {
		children[i] = abi.NewObject(nil).
			Str("apiVersion", ChildAPIVersion).
			Str("kind", ChildKind).
			Object("metadata", func(m *abi.Object) {
				m.Str("name", ChildName(group, i)).Str("namespace", ns).
					StrMap("labels", map[string]string{"example.setpoint.dev/replicagroup": group})
			}).
			Object("spec", func(s *abi.Object) {
				s.Str("group", group).Int("index", int64(i)).Str("message", message)
			}).Bytes()
	}

	// Count the observed replicas that are wanted and up to date.
	current, extra := 0, 0
	for _, c := range req.Children[ChildKey] {
		i := int(c.Int("spec", "index"))
		if i < want && c.String("metadata", "name") == ChildName(group, i) && c.String("spec", "message") == message {
			current++
		} else {
			extra++
		}
	}
	state := StateReady
	if current != want || extra > 0 {
		state = StateScaling
	}
	status := abi.NewObject(nil).Int("replicas", int64(current)).Str("state", state).Bytes()
	return &abi.ReconcileResponse{Status: status, Children: children}, nil
}
