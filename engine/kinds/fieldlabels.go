package kinds

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// attrsGetter is the part of the custom resource strategy that gives the
// selectable fields of an object.
type attrsGetter interface {
	GetAttrs(runtime.Object) (labels.Set, fields.Set, error)
}

// selectableFields returns the field labels sv's strategy can select on
// besides metadata ones: the selectable fields (jsonPath without the leading
// dot) its CRD declares for the served version, nil for other kinds. It asks
// the strategy for the fields of an empty object, which has every one.
func selectableFields(sv *Kind) (attrsGetter, map[string]bool) {
	g, ok := sv.strategy.(attrsGetter)
	if !ok {
		return nil, nil
	}
	_, fs, err := g.GetAttrs(&unstructured.Unstructured{Object: map[string]any{}})
	if err != nil {
		return nil, nil
	}
	out := map[string]bool{}
	for f := range fs {
		if f != "metadata.name" && f != "metadata.namespace" {
			out[f] = true
		}
	}
	return g, out
}

// eventFields are the field selectors Events take besides metadata ones,
// as `kubectl describe` uses them.
var eventFields = map[string][]string{
	"involvedObject.kind":            {"involvedObject", "kind"},
	"involvedObject.namespace":       {"involvedObject", "namespace"},
	"involvedObject.name":            {"involvedObject", "name"},
	"involvedObject.uid":             {"involvedObject", "uid"},
	"involvedObject.apiVersion":      {"involvedObject", "apiVersion"},
	"involvedObject.resourceVersion": {"involvedObject", "resourceVersion"},
	"involvedObject.fieldPath":       {"involvedObject", "fieldPath"},
	"reason":                         {"reason"},
	"type":                           {"type"},
	"source":                         {"source", "component"},
}

// FieldLabel resolves the field label of a field selector of k other than
// metadata.name and metadata.namespace, which every kind takes: the fields
// Kubernetes allows for Events and Namespaces give their path in an object,
// and the selectable fields a CRD declares for the served version give
// attrs, which returns an object's fields as the custom resource strategy
// gives them. ok is false for a label the kind does not take.
func (k *Kind) FieldLabel(label string) (path []string, attrs func(runtime.Object) (labels.Set, fields.Set, error), ok bool) {
	switch {
	case k.GVR == EventResource && eventFields[label] != nil:
		return eventFields[label], nil, true
	case k.GVR == EventsV1Resource && eventsV1Fields[label] != nil:
		return eventsV1Fields[label], nil, true
	case k.GVR == NamespaceResource && label == "status.phase":
		// As Kubernetes' field label conversions for namespaces allow.
		return []string{"status", "phase"}, nil, true
	case k.GVR == SecretResource && label == "type":
		// As Kubernetes' field label conversions for secrets allow.
		return []string{"type"}, nil, true
	case k.Builtin:
		return nil, nil, false
	}
	getter, declared := selectableFields(k)
	if !declared[label] {
		return nil, nil, false
	}
	return nil, getter.GetAttrs, true
}

// FieldLabelError is kube-apiserver's message for a field selector of k
// on label, which k does not take: the kinds with field label conversions
// of their own (Events, Namespaces, Secrets and custom resources) say it
// is not supported, the others name the two metadata fields they take,
// as the default conversion does.
func (k *Kind) FieldLabelError(label string) string {
	switch {
	case !k.Builtin, k.GVR == EventResource, k.GVR == EventsV1Resource, k.GVR == NamespaceResource, k.GVR == SecretResource:
		return "field label not supported: " + label
	}
	_, _, err := runtime.DefaultMetaV1FieldSelectorConversion(label, "")
	return err.Error()
}
