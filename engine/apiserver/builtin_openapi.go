package apiserver

import (
	"bytes"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The built-in kinds have no CRD, so their OpenAPI v3 documents are built
// from stand-in CRDs with the same names and a schema of the fields Setpoint
// reads; what `kubectl explain` shows for them. The core group's document is
// then renamed to the paths and model names Kubernetes uses.

func str(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
}

func object(desc string, props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc, Properties: props}
}

func open(desc string) apiextensionsv1.JSONSchemaProps {
	yes := true
	return apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc, XPreserveUnknownFields: &yes}
}

func standIn(group, plural, singular, kind string, scope apiextensionsv1.ResourceScope, schema apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// builtinStandIns are the stand-in CRDs of the built-in kinds.
func builtinStandIns() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		standIn("", "namespaces", "namespace", "Namespace", apiextensionsv1.ClusterScoped, object(
			"Namespace provides a scope for names.", map[string]apiextensionsv1.JSONSchemaProps{
				"spec": object("Spec defines the behavior of the Namespace.", map[string]apiextensionsv1.JSONSchemaProps{
					"finalizers": {Type: "array", Description: "Finalizers is an opaque list of values that must be empty to permanently remove the object from storage.",
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
				}),
				"status": object("Status describes the current status of a Namespace.", map[string]apiextensionsv1.JSONSchemaProps{
					"phase": str("Phase is the current lifecycle phase of the namespace: Active."),
				}),
			})),
		standIn("", "events", "event", "Event", apiextensionsv1.NamespaceScoped, object(
			"Event is a report of an event somewhere in the cluster.", map[string]apiextensionsv1.JSONSchemaProps{
				"involvedObject": open("The object that this event is about."),
				"reason":         str("A short, machine understandable string that gives the reason for the transition into the object's current status."),
				"message":        str("A human-readable description of the status of this operation."),
				"type":           str("Type of this event (Normal, Warning)."),
				"count":          {Type: "integer", Description: "The number of times this event has occurred."},
				"firstTimestamp": {Type: "string", Format: "date-time", Description: "The time at which the event was first recorded."},
				"lastTimestamp":  {Type: "string", Format: "date-time", Description: "The time at which the most recent occurrence of this event was recorded."},
				"source":         open("The component reporting this event."),
			})),
		standIn("apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", apiextensionsv1.ClusterScoped, object(
			"CustomResourceDefinition represents a resource that should be exposed on the API server.", map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   open("spec describes how the user wants the resources to appear: group, names, scope and versions with their schemas."),
				"status": open("status indicates the actual state of the CustomResourceDefinition: conditions, accepted names, stored versions."),
			})),
	}
}

// renameCore turns the stand-in document of the core group into the paths
// and model names Kubernetes serves it with.
func renameCore(doc []byte) []byte {
	doc = bytes.ReplaceAll(doc, []byte(`"/apis//v1/`), []byte(`"/api/v1/`))
	doc = bytes.ReplaceAll(doc, []byte(`"#/components/schemas/.v1.`), []byte(`"#/components/schemas/io.k8s.api.core.v1.`))
	return bytes.ReplaceAll(doc, []byte(`".v1.`), []byte(`"io.k8s.api.core.v1.`))
}
