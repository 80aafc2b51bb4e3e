package kinds

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NamespaceSpecFinalizers returns the spec.finalizers of the namespace obj
// (an object's map): while any is left, a deleted namespace stays,
// Terminating. A list that is not one of strings counts as holding it.
func NamespaceSpecFinalizers(obj map[string]any) []string {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, "spec", "finalizers")
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		return []string{""}
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// standardFinalizers are the finalizer names Kubernetes takes without a
// domain prefix.
var standardFinalizers = []string{string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// validateNamespace checks the names in spec.finalizers as Kubernetes'
// ValidateNamespace does on create and update (each error at the path
// spec.finalizers, unindexed, as there).
func validateNamespace(_ context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	for _, f := range NamespaceSpecFinalizers(obj.Object) {
		errs = append(errs, validateFinalizerName(f, field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// validateNamespaceFinalize is Kubernetes' ValidateNamespaceFinalizeUpdate,
// all that validates a write through a namespace's finalize subresource:
// the metadata update, and the names in spec.finalizers (indexed, as there).
func validateNamespaceFinalize(obj, old *unstructured.Unstructured) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))
	path := field.NewPath("spec", "finalizers")
	for i, f := range NamespaceSpecFinalizers(obj.Object) {
		errs = append(errs, validateFinalizerName(f, path.Index(i))...)
	}
	return errs
}

// validateFinalizerName checks a finalizer name in spec.finalizers: a
// qualified name, and one without a domain prefix one of the standard
// names.
func validateFinalizerName(f string, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(f, p)
	if !strings.Contains(f, "/") && !slices.Contains(standardFinalizers, f) {
		errs = append(errs, field.Invalid(p, f, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return errs
}
