package kinds

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
)

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// CRDFromMap decodes a CRD and applies the API's defaults to it.
func CRDFromMap(obj map[string]any) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, crd); err != nil {
		return nil, fmt.Errorf("decode CustomResourceDefinition: %w", err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

func crdToInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, fmt.Errorf("convert CustomResourceDefinition: %w", err)
	}
	return out, nil
}

// validateCRD runs the apiextensions validation of a CRD (and of an update).
func validateCRD(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	crd, err := CRDFromMap(obj.Object)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	in, err := crdToInternal(crd)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	if old == nil {
		if errs := crdSchemaBounds(crd, nil); len(errs) > 0 {
			return errs
		}
		return extvalidation.ValidateCustomResourceDefinition(ctx, in)
	}
	oldCRD, err := CRDFromMap(old.Object)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	if errs := crdSchemaBounds(crd, oldCRD); len(errs) > 0 {
		return errs
	}
	oldIn, err := crdToInternal(oldCRD)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return extvalidation.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
}

// BuildCRD turns a CRD into the kinds it serves, one per served version,
// with the registry's field managers. A CRD being deleted gives
// terminating kinds.
func (r *Registry) BuildCRD(crd *apiextensionsv1.CustomResourceDefinition) ([]*Kind, error) {
	names := crd.Status.AcceptedNames
	if names.Plural == "" {
		names = crd.Spec.Names
	}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	var out []*Kind
	storage, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, fmt.Errorf("crd %s: %w", crd.Name, err)
	}
	storage = schema.GroupVersion{Group: crd.Spec.Group, Version: storage}.String()
	byVersion := make(map[string]*structuralschema.Structural, len(crd.Spec.Versions))
	read := newReadSchemas(crd, byVersion)
	for _, v := range crd.Spec.Versions {
		props, structural, err := versionSchema(crd, v.Name)
		if err != nil {
			return nil, err
		}
		if structural != nil {
			byVersion[v.Name] = structural
		}
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: names.Plural}
		gvk := gvr.GroupVersion().WithKind(names.Kind)

		validator, err := newBoundedSchemaValidator(props)
		if err != nil {
			return nil, fmt.Errorf("crd %s version %s: schema validator: %w", crd.Name, v.Name, err)
		}

		subs, err := apihelpers.GetSubresourcesForVersion(crd, v.Name)
		if err != nil {
			return nil, fmt.Errorf("crd %s version %s: %w", crd.Name, v.Name, err)
		}
		var statusSpec *apiextensions.CustomResourceSubresourceStatus
		var scaleSpec *apiextensions.CustomResourceSubresourceScale
		var scaleV1 *apiextensionsv1.CustomResourceSubresourceScale
		var statusValidator *boundedSchemaValidator
		if subs != nil && subs.Status != nil {
			statusSpec = &apiextensions.CustomResourceSubresourceStatus{}
			if props != nil {
				if st, ok := props.Properties["status"]; ok {
					if statusValidator, err = newBoundedSchemaValidator(&st); err != nil {
						return nil, fmt.Errorf("crd %s version %s: status validator: %w", crd.Name, v.Name, err)
					}
				}
			}
		}
		if subs != nil && subs.Scale != nil {
			scaleV1 = subs.Scale.DeepCopy()
			scaleSpec = &apiextensions.CustomResourceSubresourceScale{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subs.Scale, scaleSpec, nil); err != nil {
				return nil, fmt.Errorf("crd %s version %s: scale: %w", crd.Name, v.Name, err)
			}
		}

		columns := v.AdditionalPrinterColumns
		if len(columns) == 0 {
			columns = []apiextensionsv1.CustomResourceColumnDefinition{{
				Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
			}}
		}
		table, _ := tableconvertor.New(columns) // on error it still returns the default convertor
		var strategicPatch any
		if gvr == leaseResource {
			// A Kubernetes kind served by a CRD: kube-apiserver's printer, and
			// strategic merge patches by its Go type, as kube-apiserver takes
			// them (client-side kubectl apply sends one).
			table = leaseTable()
			strategicPatch = &coordinationv1.Lease{}
		}

		st := customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(), namespaced, gvk,
			validator, statusValidator.schemaValidator(), structural, statusSpec, scaleSpec, v.SelectableFields)
		sv := &Kind{
			Resource: Resource{
				GVR:        gvr,
				Kind:       names.Kind,
				ListKind:   names.ListKind,
				Singular:   names.Singular,
				ShortNames: slices.Clone(names.ShortNames),
				Categories: slices.Clone(names.Categories),
				Namespaced: namespaced,
				Status:     statusSpec != nil,
				Scale:      scaleSpec != nil,
				CRD:        crd.Name,

				DeprecationWarning: deprecationWarning(crd, v),
			},
			strategy:        st,
			statusStrategy:  customresource.NewStatusStrategy(st),
			structural:      structural,
			defaults:        defaultingSchema(structural),
			defaultsBuilt:   true,
			preserveUnknown: crd.Spec.PreserveUnknownFields,
			table:           table,
			strategicPatch:  strategicPatch,
			scale:           scaleV1,
			read:            read,
			storage:         storage,
			terminating:     crd.DeletionTimestamp != nil,
		}
		embedded, listTypes := schemaExtensions(structural)
		if scaleSpec == nil {
			sv.createValidation = newCreateValidation(gvk, namespaced, validator, statusValidator, structural, embedded, listTypes)
		}
		sv.noEmbedded = !embedded
		sv.prefix = storedPrefix(sv)
		out = append(out, sv)
	}
	if err := read.seal(); err != nil {
		return nil, err
	}
	if err := r.crdFieldManagers(crd, out); err != nil {
		return nil, err
	}
	return out, nil
}

// deprecationWarning is the warning Kubernetes sends with every request to a
// deprecated CRD version: the version's own, or by default one that names the
// newest served, non-deprecated version newer than it.
func deprecationWarning(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) string {
	if !v.Deprecated {
		return ""
	}
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", crd.Spec.Group, v.Name, crd.Spec.Names.Kind)
	newest := ""
	for _, o := range crd.Spec.Versions {
		if o.Served && !o.Deprecated && version.CompareKubeAwareVersionStrings(v.Name, o.Name) < 0 &&
			(newest == "" || version.CompareKubeAwareVersionStrings(o.Name, newest) > 0) {
			newest = o.Name
		}
	}
	if newest != "" {
		msg += fmt.Sprintf("; use %s/%s %s", crd.Spec.Group, newest, crd.Spec.Names.Kind)
	}
	return msg
}

// versionSchema returns the schema of a CRD version, and its structural
// schema with defaults pruned as writes apply them; both nil when the version
// has none.
func versionSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) (*apiextensions.JSONSchemaProps, *structuralschema.Structural, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, nil, fmt.Errorf("crd %s version %s: %w", crd.Name, version, err)
	}
	if val == nil {
		return nil, nil, nil
	}
	in := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, in, nil); err != nil {
		return nil, nil, fmt.Errorf("crd %s version %s: convert schema: %w", crd.Name, version, err)
	}
	s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("crd %s version %s: structural schema: %w", crd.Name, version, err)
	}
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, nil, fmt.Errorf("crd %s version %s: prune defaults: %w", crd.Name, version, err)
	}
	return in.OpenAPIV3Schema, s, nil
}

// PrepareCRD sets the defaults and server-owned status of the CRD obj, as
// written: accepted names (unless they clash with another CRD of the
// registry), the NamesAccepted and Established conditions and the stored
// versions.
func (r *Registry) PrepareCRD(obj map[string]any) error {
	crd, err := CRDFromMap(obj)
	if err != nil {
		return err
	}
	conflict := r.namesConflict(crd)
	now := metav1.Now()
	if conflict == "" {
		crd.Status.AcceptedNames = crd.Spec.Names
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue,
			Reason: "NoConflicts", Message: "no conflicts found", LastTransitionTime: now,
		})
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
			Reason: "InitialNamesAccepted", Message: "the initial names have been accepted", LastTransitionTime: now,
		})
	} else {
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse,
			Reason: "NameConflict", Message: conflict, LastTransitionTime: now,
		})
		if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
				Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
				Reason: "NotAccepted", Message: "not all names are accepted", LastTransitionTime: now,
			})
		}
	}
	if sv, err := apihelpers.GetCRDStorageVersion(crd); err == nil && !slices.Contains(crd.Status.StoredVersions, sv) {
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, sv)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return fmt.Errorf("encode CustomResourceDefinition: %w", err)
	}
	meta := obj["metadata"]
	clear(obj)
	for k, v := range m {
		obj[k] = v
	}
	obj["metadata"] = meta
	return nil
}

// namesConflict reports a clash of crd's names with another CRD of its group.
func (r *Registry) namesConflict(crd *apiextensionsv1.CustomResourceDefinition) string {
	n := crd.Spec.Names
	for _, other := range r.CRDs() {
		if other.Name == crd.Name || other.Spec.Group != crd.Spec.Group {
			continue
		}
		on := other.Status.AcceptedNames
		switch {
		case on.Kind == n.Kind:
			return fmt.Sprintf("%q is already in use", n.Kind)
		case on.ListKind == n.ListKind:
			return fmt.Sprintf("%q is already in use", n.ListKind)
		case on.Singular == n.Singular || on.Plural == n.Singular:
			return fmt.Sprintf("%q is already in use", n.Singular)
		}
		for _, sn := range n.ShortNames {
			if slices.Contains(on.ShortNames, sn) {
				return fmt.Sprintf("%q is already in use", sn)
			}
		}
	}
	return ""
}
