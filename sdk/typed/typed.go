package typed

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Metadata is the part of an object's metadata a plugin usually reads.
// Members it does not name are not decoded.
type Metadata struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	DeletionTimestamp string            `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
}

// Object is an object of a kind whose spec is S and status is T.
type Object[S, T any] struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       S        `json:"spec"`
	Status     T        `json:"status"`
}

// Members of an object and of its metadata that Decode reads, each set
// found in one pass (abi.RawJSON.Fields).
var (
	objectMembers = []string{"apiVersion", "kind", "metadata", "spec", "status"}
	metaMembers   = []string{"name", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "labels", "annotations", "finalizers"}
)

// Decode decodes raw, an object as the engine sends it, into an Object.
// The envelope and metadata are read with the raw API; encoding/json
// decodes only the spec and the status into S and T.
func Decode[S, T any](raw abi.RawJSON) (*Object[S, T], error) {
	var top [5]abi.RawJSON
	raw.Fields(objectMembers, top[:])
	obj := new(Object[S, T])
	obj.APIVersion, obj.Kind = top[0].String(), top[1].String()
	var meta [10]abi.RawJSON
	top[2].Fields(metaMembers, meta[:])
	m := &obj.Metadata
	m.Name, m.Namespace, m.UID, m.ResourceVersion = meta[0].String(), meta[1].String(), meta[2].String(), meta[3].String()
	m.Generation = meta[4].Int()
	m.CreationTimestamp, m.DeletionTimestamp = meta[5].String(), meta[6].String()
	m.Labels, m.Annotations = meta[7].StringMap(), meta[8].StringMap()
	if present(meta[9]) {
		if err := json.Unmarshal(meta[9], &m.Finalizers); err != nil {
			return nil, fmt.Errorf("typed: decoding %s: metadata.finalizers: %w", describe(raw), err)
		}
	}
	if present(top[3]) {
		if err := json.Unmarshal(top[3], &obj.Spec); err != nil {
			return nil, fmt.Errorf("typed: decoding %s: spec: %w", describe(raw), err)
		}
	}
	if present(top[4]) {
		if err := json.Unmarshal(top[4], &obj.Status); err != nil {
			return nil, fmt.Errorf("typed: decoding %s: status: %w", describe(raw), err)
		}
	}
	return obj, nil
}

func present(v abi.RawJSON) bool { return len(v) > 0 && string(v) != "null" }

func describe(raw abi.RawJSON) string {
	if k := raw.String("kind"); k != "" {
		return k + " " + raw.String("metadata", "name")
	}
	return "object"
}

// Request is a reconcile request with the object decoded.
type Request[S, T any] struct {
	Object *Object[S, T]
	// Raw is the request as the raw API sees it (children, attempt,
	// config); its RawJSON members are valid only during the call.
	Raw *abi.ReconcileRequest
}

// Children decodes the observed children of kind key ("Kind.group", or
// "Kind" for the core group) into values of type C.
func Children[C any](raw *abi.ReconcileRequest, key string) ([]C, error) {
	items := raw.Children[key]
	out := make([]C, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &out[i]); err != nil {
			return nil, fmt.Errorf("typed: decoding child %s %d: %w", key, i, err)
		}
	}
	return out, nil
}

// Result is what a typed reconcile handler returns.
type Result[T any] struct {
	// Status replaces the object's status when not nil. The engine adds
	// observedGeneration and the Ready condition.
	Status *T
	// Children is the complete set of desired children, each a value that
	// encodes (with encoding/json) to a full object with apiVersion, kind
	// and metadata.name: a struct, a map, or an abi.RawJSON.
	Children     []any
	RequeueAfter time.Duration
	Events       []abi.Event
}

// ReconcileFunc is a typed reconcile handler.
type ReconcileFunc[S, T any] func(h plugin.Host, req *Request[S, T]) (*Result[T], error)

// Reconcile adapts a typed handler to the SDK's plugin.ReconcileFunc. An
// object that does not decode into the structs is a terminal error (it will
// not decode better on a retry); an error from fn is reported as usual
// (wrap it with plugin.Terminal when retrying cannot help).
func Reconcile[S, T any](fn ReconcileFunc[S, T]) plugin.ReconcileFunc {
	return func(h plugin.Host, raw *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
		obj, err := Decode[S, T](raw.Object)
		if err != nil {
			return nil, plugin.Terminal(err)
		}
		res, err := fn(h, &Request[S, T]{Object: obj, Raw: raw})
		if err != nil || res == nil {
			return nil, err
		}
		resp := &abi.ReconcileResponse{RequeueAfter: res.RequeueAfter, Events: res.Events}
		if res.Status != nil {
			if resp.Status, err = json.Marshal(res.Status); err != nil {
				return nil, plugin.Terminal(fmt.Errorf("typed: encoding status: %w", err))
			}
		}
		resp.Children = make([]abi.RawJSON, len(res.Children))
		for i, c := range res.Children {
			if resp.Children[i], err = json.Marshal(c); err != nil {
				return nil, plugin.Terminal(fmt.Errorf("typed: encoding child %d: %w", i, err))
			}
		}
		return resp, nil
	}
}

// AdmitRequest is an admission request with the objects decoded.
type AdmitRequest[S, T any] struct {
	// Object is the new object (CREATE, UPDATE); nil on DELETE.
	Object *Object[S, T]
	// OldObject is the existing object (UPDATE, DELETE); nil on CREATE.
	OldObject *Object[S, T]
	// Raw is the request as the raw API sees it (operation, user, dry run,
	// config).
	Raw *abi.AdmissionRequest
}

// AdmitFunc is a typed admission handler.
type AdmitFunc[S, T any] func(h plugin.Host, req *AdmitRequest[S, T]) (*abi.AdmissionResponse, error)

// Admit adapts a typed handler to the SDK's plugin.AdmitFunc. An object
// that does not decode into the structs is denied with the decoding error
// (422), as is an error from fn (with 403, as the raw API does).
func Admit[S, T any](fn AdmitFunc[S, T]) plugin.AdmitFunc {
	return func(h plugin.Host, raw *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
		req := &AdmitRequest[S, T]{Raw: raw}
		var err error
		if len(raw.Object) > 0 {
			if req.Object, err = Decode[S, T](raw.Object); err != nil {
				return Denied(422, err.Error()), nil
			}
		}
		if len(raw.OldObject) > 0 {
			if req.OldObject, err = Decode[S, T](raw.OldObject); err != nil {
				return Denied(422, err.Error()), nil
			}
		}
		return fn(h, req)
	}
}

// Allowed admits the request unchanged.
func Allowed(warnings ...string) *abi.AdmissionResponse {
	return &abi.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// Denied refuses the request with message; code is its HTTP status (0 is
// 403 Forbidden, 422 reads as Invalid).
func Denied(code int, message string) *abi.AdmissionResponse {
	return &abi.AdmissionResponse{Message: message, Code: code}
}

// SetSpec admits the request with its spec replaced by spec (a mutating
// plugin's answer). Only the spec is patched: members of the object the
// structs do not declare are kept.
func SetSpec[S any](spec S, warnings ...string) (*abi.AdmissionResponse, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("typed: encoding spec: %w", err)
	}
	patch := append(append([]byte(`[{"op":"add","path":"/spec","value":`), b...), "}]"...)
	return &abi.AdmissionResponse{Allowed: true, Patch: patch, Warnings: warnings}, nil
}
