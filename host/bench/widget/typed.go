package widget

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/typed"
)

// Spec and Status are the Widget's spec and status as an author using the
// SDK's typed layer declares them: the whole spec, decoded with
// encoding/json.
type Spec struct {
	Name     string          `json:"name"`
	Size     string          `json:"size"`
	Color    string          `json:"color,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
	Replicas int             `json:"replicas,omitempty"`
	Template json.RawMessage `json:"template,omitempty"`
}

// Status is the Widget's status.
type Status struct {
	State           string `json:"state,omitempty"`
	Replicas        int64  `json:"replicas,omitempty"`
	LastProvisioned string `json:"lastProvisioned,omitempty"`
}

type configMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   typed.Metadata    `json:"metadata"`
	Data       map[string]string `json:"data"`
}

// TypedReconcile is Reconcile written on the SDK's typed layer (sdk/typed):
// the same logic and the same response, with the object decoded into
// structs and the status and child encoded from structs by encoding/json.
// The benchmarks compare it with Reconcile, which uses the raw API.
var TypedReconcile = typed.Reconcile(reconcileTyped)

func reconcileTyped(h plugin.Host, req *typed.Request[Spec, Status]) (*typed.Result[Status], error) {
	obj := req.Object
	var replicas int64
	var count string
	switch obj.Spec.Size {
	case "small":
		replicas, count = 1, "1"
	case "medium":
		replicas, count = 3, "3"
	case "large":
		replicas, count = 5, "5"
	default:
		return nil, plugin.Terminal(ErrInvalidSize)
	}
	if req.Raw.Config["log"] == "true" {
		h.Log("info", "reconciling widget", "size", obj.Spec.Size)
	}
	child := configMap{APIVersion: "v1", Kind: "ConfigMap",
		Metadata: typed.Metadata{Name: obj.Metadata.Name + "-config", Namespace: obj.Metadata.Namespace},
		Data:     map[string]string{"name": obj.Spec.Name, "size": obj.Spec.Size, "replicas": count}}
	state := "Provisioning"
	if len(req.Raw.Children["ConfigMap"]) > 0 {
		state = "Ready"
	}
	return &typed.Result[Status]{
		Status:   &Status{State: state, Replicas: replicas, LastProvisioned: obj.Metadata.CreationTimestamp},
		Children: []any{child},
	}, nil
}
