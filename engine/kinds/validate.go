package kinds

import (
	"context"
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// createValidation validates a new custom resource with the same checks,
// in the same order and with the same errors, as the Validate of the
// apiextensions custom resource strategy (type, metadata, OpenAPI schema,
// embedded resources, list sets and maps, CEL rules), for kinds without a
// scale subresource, with savings decided once per kind:
//
//   - metadata is read into an ObjectMeta directly when it holds only the
//     plain fields canonicalMeta knows, instead of through the reflective
//     unstructured converter (which stays the path for anything else);
//   - the embedded-resource walk runs only when the schema has an
//     x-kubernetes-embedded-resource, and the list set/map check only when
//     it has an x-kubernetes-list-type set or map: neither can report an
//     error otherwise; the list check, only when the object holds such a
//     list that could break its rules (listNode);
//   - CEL rules that all hold are found so without the validator's
//     per-call schema copies (celPass); the validator decides the rest.
//
// Updates and status updates are validated the same way (validateupdate.go).
type createValidation struct {
	gvk             schema.GroupVersionKind
	namespaced      bool
	validator       *boundedSchemaValidator
	statusValidator *boundedSchemaValidator // of status alone; nil without a status subresource
	structural      *structuralschema.Structural
	cel             *cel.Validator
	celPass         *celPass // nil when the validator must decide every object
	embedded        bool
	listTypes       bool
	lists           *listNode // where listTypes leads; nil without
}

// newCreateValidation returns the validation of a kind whose schema has
// the extensions schemaExtensions reported.
func newCreateValidation(gvk schema.GroupVersionKind, namespaced bool, validator, statusValidator *boundedSchemaValidator, structural *structuralschema.Structural, embedded, listTypes bool) *createValidation {
	return &createValidation{gvk: gvk, namespaced: namespaced, validator: validator, statusValidator: statusValidator, structural: structural,
		cel: cel.NewValidator(structural, true, celconfig.PerCallLimit), celPass: newCELPass(structural), embedded: embedded, listTypes: listTypes,
		lists: newListNode(structural)}
}

// schemaExtensions reports whether s has an x-kubernetes-embedded-resource
// and an x-kubernetes-list-type set or map anywhere: one walk, when a
// kind's CRD is built, for coerce and for validation.
func schemaExtensions(s *structuralschema.Structural) (embedded, listTypes bool) {
	if s == nil {
		return false, false
	}
	v := structuralschema.Visitor{Structural: func(s *structuralschema.Structural) bool {
		if s.XEmbeddedResource {
			embedded = true
		}
		if s.XListType != nil && (*s.XListType == "set" || *s.XListType == "map") {
			listTypes = true
		}
		return false // nothing changed
	}}
	v.Visit(s)
	return embedded, listTypes
}

func (v *createValidation) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	// As in the strategy, a wrong kind or apiVersion skips the metadata and
	// schema checks, not the ones below.
	errs := v.typeMeta(u)
	if len(errs) == 0 {
		if meta, merrs := validationMeta(u.Object); len(merrs) > 0 {
			errs = append(errs, merrs...)
		} else {
			errs = append(errs, validation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, v.namespaced,
				validation.NameIsDNSSubdomain, field.NewPath("metadata"), utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))...)
		}
		b := v.validator.withContext(ctx)
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, b)...)
		if b.stopped {
			// The object is far from its schema (or the request is gone):
			// the walks below and the CEL rules are not worth running.
			return append(errs, rulesNotChecked())
		}
	}
	if v.embedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, v.structural, false)...)
	}
	if v.listTypes {
		errs = append(errs, v.listErrors(u.Object)...)
	}
	return v.celRules(ctx, errs, u, nil)
}

// blocking tells whether errs holds an error that keeps CEL rules from
// being evaluated: the object is too far from its schema.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// validationMeta returns obj's metadata as an ObjectMeta, as the custom
// resource validator reads it (with the unstructured converter), directly
// when typedMeta handles it.
func validationMeta(obj map[string]any) (*metav1.ObjectMeta, field.ErrorList) {
	raw := obj["metadata"]
	if raw == nil {
		return &metav1.ObjectMeta{}, nil
	}
	md, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	if m, ok := typedMeta(md); ok {
		return m, nil
	}
	m := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, m); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
	}
	return m, nil
}

// typedMeta builds the ObjectMeta of metadata that holds only the fields
// canonicalMeta knows, with the same types (owner references as
// typedOwnerReference reads them); it reports false otherwise.
func typedMeta(md map[string]any) (*metav1.ObjectMeta, bool) {
	m := &metav1.ObjectMeta{}
	for k, v := range md {
		switch k {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			switch k {
			case "name":
				m.Name = s
			case "generateName":
				m.GenerateName = s
			case "namespace":
				m.Namespace = s
			case "selfLink":
				m.SelfLink = s
			case "uid":
				m.UID = types.UID(s)
			case "resourceVersion":
				m.ResourceVersion = s
			}
		case "generation", "deletionGracePeriodSeconds":
			n, ok := v.(int64)
			if !ok {
				return nil, false
			}
			if k == "generation" {
				m.Generation = n
			} else {
				m.DeletionGracePeriodSeconds = &n
			}
		case "creationTimestamp", "deletionTimestamp":
			t, ok := metaTime(v)
			if !ok {
				return nil, false
			}
			mt := metav1.NewTime(t.Local())
			if k == "creationTimestamp" {
				m.CreationTimestamp = mt
			} else {
				m.DeletionTimestamp = &mt
			}
		case "labels", "annotations":
			in, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			out := make(map[string]string, len(in))
			for mk, mv := range in {
				s, ok := mv.(string)
				if !ok {
					return nil, false
				}
				out[mk] = s
			}
			if k == "labels" {
				m.Labels = out
			} else {
				m.Annotations = out
			}
		case "finalizers":
			l, ok := v.([]any)
			if !ok {
				return nil, false
			}
			out := make([]string, len(l))
			for i, e := range l {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				out[i] = s
			}
			m.Finalizers = out
		case "ownerReferences":
			l, ok := v.([]any)
			if !ok {
				return nil, false
			}
			out := make([]metav1.OwnerReference, len(l))
			for i, e := range l {
				if !typedOwnerReference(e, &out[i]) {
					return nil, false
				}
			}
			m.OwnerReferences = out
		default:
			return nil, false
		}
	}
	return m, true
}

// typedOwnerReference fills ref from an owner reference holding only
// apiVersion, kind, name and uid as strings and controller and
// blockOwnerDeletion as booleans; it reports false otherwise.
func typedOwnerReference(v any, ref *metav1.OwnerReference) bool {
	in, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range in {
		switch k {
		case "apiVersion", "kind", "name", "uid":
			s, ok := v.(string)
			if !ok {
				return false
			}
			switch k {
			case "apiVersion":
				ref.APIVersion = s
			case "kind":
				ref.Kind = s
			case "name":
				ref.Name = s
			case "uid":
				ref.UID = types.UID(s)
			}
		case "controller", "blockOwnerDeletion":
			b, ok := v.(bool)
			if !ok {
				return false
			}
			if k == "controller" {
				ref.Controller = &b
			} else {
				ref.BlockOwnerDeletion = &b
			}
		default:
			return false
		}
	}
	return true
}
