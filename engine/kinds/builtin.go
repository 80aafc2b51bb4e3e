package kinds

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The built-in resources.
var (
	NamespaceResource = corev1.SchemeGroupVersion.WithResource("namespaces")
	EventResource     = corev1.SchemeGroupVersion.WithResource("events")
)

// DefaultNamespace exists from the start and cannot be deleted.
const DefaultNamespace = "default"

// NamespaceFinalizer, in a namespace's spec.finalizers, keeps it, once
// deleted, Terminating until the garbage collector has deleted everything
// in it and removed the finalizer through the namespace's /finalize
// subresource. Namespaces deleted by earlier Setpoint versions carry it in
// metadata.finalizers instead.
const NamespaceFinalizer = "kubernetes"

// builtinStrategy is the strategy of the kinds Setpoint serves without a CRD.
type builtinStrategy struct {
	namespaced bool
	hasStatus  bool
	// statusOnly makes this the strategy of the /status subresource.
	statusOnly bool
	// generation makes the strategy count changes of everything but
	// metadata and status in metadata.generation: 1 on create, one more on
	// each update that changes them. Of the built-in kinds only
	// CustomResourceDefinitions do, as in Kubernetes; the strategies of the
	// others never touch it, so an object keeps the generation it was
	// created with (none, unless its creator sent one).
	generation bool
	nameFn     apivalidation.ValidateNameFunc
	validate   func(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList
}

func (b builtinStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	u := obj.(*unstructured.Unstructured)
	if b.hasStatus {
		delete(u.Object, "status")
	}
	if b.generation {
		u.SetGeneration(1)
	}
}

func (b builtinStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	u, o := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if b.statusOnly {
		status, ok := u.Object["status"]
		*u = *o.DeepCopy()
		if ok {
			u.Object["status"] = status
		} else {
			delete(u.Object, "status")
		}
		return
	}
	if b.hasStatus {
		if st, ok := o.Object["status"]; ok {
			u.Object["status"] = st
		} else {
			delete(u.Object, "status")
		}
	}
	if !b.generation {
		return
	}
	if !equality.Semantic.DeepEqual(withoutMeta(u.Object), withoutMeta(o.Object)) {
		u.SetGeneration(o.GetGeneration() + 1)
	} else {
		u.SetGeneration(o.GetGeneration())
	}
}

func withoutMeta(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

func (b builtinStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	u := obj.(*unstructured.Unstructured)
	errs := apivalidation.ValidateObjectMetaAccessor(u, b.namespaced, b.nameFn, field.NewPath("metadata"))
	if b.validate != nil {
		errs = append(errs, b.validate(ctx, u, nil)...)
	}
	return errs
}

func (b builtinStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, o := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	errs := apivalidation.ValidateObjectMetaAccessor(u, b.namespaced, b.nameFn, field.NewPath("metadata"))
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(u, o, field.NewPath("metadata"))...)
	if b.validate != nil && !b.statusOnly {
		errs = append(errs, b.validate(ctx, u, o)...)
	}
	return errs
}

func newBuiltin(gvr schema.GroupVersionResource, kind, singular string, namespaced, hasStatus bool,
	nameFn apivalidation.ValidateNameFunc, validate func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) field.ErrorList,
	columns []apiextensionsv1.CustomResourceColumnDefinition, typed any, fields []string, shortNames ...string) *Kind {
	st := builtinStrategy{namespaced: namespaced, hasStatus: hasStatus, nameFn: nameFn, validate: validate}
	sst := st
	sst.statusOnly = true
	if !slices.ContainsFunc(columns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool {
		return c.JSONPath == ".metadata.creationTimestamp"
	}) {
		columns = append(columns, apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"})
	}
	table, _ := tableconvertor.New(columns)
	sv := &Kind{
		Resource: Resource{
			GVR: gvr, Kind: kind, ListKind: kind + "List", Singular: singular,
			ShortNames: shortNames, Namespaced: namespaced, Status: hasStatus, Builtin: true,
		},
		strategy:       st,
		statusStrategy: sst,
		table:          table,
		strategicPatch: typed,
		fields:         fieldSet(fields),
		typed:          newTypedFields(typed),
	}
	sv.prefix = storedPrefix(sv)
	return sv
}

// countsGeneration makes k's strategy set metadata.generation (see
// builtinStrategy.generation) and returns k.
func countsGeneration(k *Kind) *Kind {
	st := k.strategy.(builtinStrategy)
	st.generation = true
	k.strategy = st
	return k
}

func fieldSet(fields []string) map[string]bool {
	m := map[string]bool{"apiVersion": true, "kind": true, "metadata": true}
	for _, f := range fields {
		m[f] = true
	}
	return m
}

// builtins returns the kinds served without a CRD, new ones on each call.
func builtins() []*Kind {
	out := []*Kind{
		newBuiltin(NamespaceResource, "Namespace", "namespace", false, true, apivalidation.ValidateNamespaceName, validateNamespace,
			nil, &corev1.Namespace{}, []string{"spec", "status"}, "ns"),
		newEventKind(),
		countsGeneration(newBuiltin(CRDResource, "CustomResourceDefinition", "customresourcedefinition", false, true, apivalidation.NameIsDNSSubdomain, validateCRD,
			nil, nil, []string{"spec", "status"}, "crd", "crds")),
		newServiceAccountKind(),
		newSecretKind(), newConfigMapKind(), newEventsV1Kind(),
	}
	// The tables kube-apiserver serves for these kinds: its printers'
	// columns for Namespaces; for CRDs, its default table, which
	// shows when one was created (RFC 3339), not its age.
	out[0].table = namespaceTable()
	out[2].table = rest.NewDefaultTableConvertor(CRDResource.GroupResource())
	// kube-apiserver lists CRDs (with APIServices and the admission
	// kinds) in the category api-extensions.
	out[2].Categories = []string{"api-extensions"}
	out[2].typed = newTypedFields(&apiextensionsv1.CustomResourceDefinition{})
	out = append(out, rbacBuiltins()...)
	return out
}

// SetNamespaceNameLabel sets the label kubernetes.io/metadata.name of the
// namespace obj to its name, whatever it was, and reports whether that
// changed obj. Kubernetes sets it on every write (the namespace strategy's
// Canonicalize, which runs once generateName has given the name) and on
// every read (SetDefaults_Namespace), so a client cannot change or remove
// it; Setpoint sets it on every write (after generateName) and
// writes it once into namespaces stored without it, when it starts.
func SetNamespaceNameLabel(obj map[string]any) bool {
	u := unstructured.Unstructured{Object: obj}
	name := u.GetName()
	if name == "" {
		return false
	}
	labels := u.GetLabels()
	if v, ok := labels[corev1.LabelMetadataName]; ok && v == name {
		return false
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = name
	u.SetLabels(labels)
	return true
}
