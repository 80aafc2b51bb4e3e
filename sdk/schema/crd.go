package schema

import (
	"strings"
)

// Kind describes a kind whose CRD CRD generates.
type Kind struct {
	// Group is the API group, e.g. example.setpoint.dev.
	Group string
	// Version is the served and stored version; default v1.
	Version string
	// Kind is the kind's name, e.g. Widget.
	Kind string
	// Plural is the resource name; default the lower-case kind plus "s".
	Plural string
	// ShortNames are the kind's short names for the CLI.
	ShortNames []string
	// ClusterScoped makes the kind cluster-scoped; default namespaced.
	ClusterScoped bool
	// Spec and Status are values (or nil pointers) of the spec and status
	// structs.
	Spec, Status any
	// Columns are extra printer columns, each name=jsonPath
	// (e.g. "State=.status.state").
	Columns []string
}

// CRD returns the apiextensions.k8s.io/v1 CustomResourceDefinition of k:
// the spec and status schemas from the structs, the status subresource,
// and the status members the engine writes.
func CRD(k Kind) map[string]any {
	version := k.Version
	if version == "" {
		version = "v1"
	}
	plural := k.Plural
	if plural == "" {
		plural = strings.ToLower(k.Kind) + "s"
	}
	scope := "Namespaced"
	if k.ClusterScoped {
		scope = "Cluster"
	}
	names := map[string]any{
		"kind":     k.Kind,
		"listKind": k.Kind + "List",
		"plural":   plural,
		"singular": strings.ToLower(k.Kind),
	}
	if len(k.ShortNames) > 0 {
		names["shortNames"] = k.ShortNames
	}
	spec := Props{"type": "object"}
	if k.Spec != nil {
		spec = For(k.Spec)
	}
	status := Props{"type": "object"}
	if k.Status != nil {
		status = For(k.Status)
	}
	delete(status, "required") // the engine writes status before the plugin has
	engineStatus(status)
	top := Props{
		"type": "object",
		"properties": Props{
			"spec":   spec,
			"status": status,
		},
	}
	if req, _ := spec["required"].([]string); len(req) > 0 {
		top["required"] = []string{"spec"}
	}
	v := map[string]any{
		"name":         version,
		"served":       true,
		"storage":      true,
		"schema":       map[string]any{"openAPIV3Schema": top},
		"subresources": map[string]any{"status": map[string]any{}},
	}
	var cols []any
	for _, c := range k.Columns {
		name, path, _ := strings.Cut(c, "=")
		cols = append(cols, map[string]any{"name": name, "type": "string", "jsonPath": path})
	}
	if len(cols) > 0 {
		cols = append(cols, map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
		v["additionalPrinterColumns"] = cols
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + k.Group},
		"spec": map[string]any{
			"group":    k.Group,
			"names":    names,
			"scope":    scope,
			"versions": []any{v},
		},
	}
}

// engineStatus adds to a status schema what the engine writes into every
// reconciled object's status: observedGeneration and the conditions list.
func engineStatus(status Props) {
	props, _ := status["properties"].(Props)
	if props == nil {
		props = Props{}
		status["properties"] = props
	}
	if _, ok := props["observedGeneration"]; !ok {
		props["observedGeneration"] = Props{"type": "integer", "format": "int64"}
	}
	if _, ok := props["conditions"]; !ok {
		props["conditions"] = Props{
			"type": "array",
			"items": Props{
				"type":     "object",
				"required": []string{"type", "status"},
				"properties": Props{
					"type":               Props{"type": "string"},
					"status":             Props{"type": "string"},
					"reason":             Props{"type": "string"},
					"message":            Props{"type": "string"},
					"observedGeneration": Props{"type": "integer", "format": "int64"},
					"lastTransitionTime": Props{"type": "string", "format": "date-time"},
				},
			},
			"x-kubernetes-list-type":     "map",
			"x-kubernetes-list-map-keys": []string{"type"},
		}
	}
}
