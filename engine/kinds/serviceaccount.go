package kinds

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ServiceAccountResource is core/v1 ServiceAccounts: the identities that
// programs acting on the API authenticate as, with tokens the
// serviceaccounts/token subresource issues.
var ServiceAccountResource = corev1.SchemeGroupVersion.WithResource("serviceaccounts")

// serviceAccountFields are the top-level fields a ServiceAccount keeps.
var serviceAccountFields = []string{"secrets", "imagePullSecrets", "automountServiceAccountToken"}

// newServiceAccountKind is the ServiceAccount kind: namespaced, no status,
// named by a DNS subdomain (Kubernetes' ValidateServiceAccountName), and
// its fields checked against corev1.ServiceAccount.
func newServiceAccountKind() *Kind {
	k := newBuiltin(ServiceAccountResource, "ServiceAccount", "serviceaccount", true, false,
		apivalidation.NameIsDNSSubdomain, validateServiceAccount, nil,
		&corev1.ServiceAccount{}, serviceAccountFields, "sa")
	k.table = serviceAccountTable()
	return k
}

// validateServiceAccount refuses a ServiceAccount whose fields do not have
// the types of corev1.ServiceAccount (a string for a list, say), as
// Kubernetes' decoding does; Kubernetes validates nothing else in them.
func validateServiceAccount(_ context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	for _, f := range serviceAccountFields {
		v, ok := obj.Object[f]
		if !ok {
			continue
		}
		var sa corev1.ServiceAccount
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(map[string]any{f: v}, &sa, true); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(f), v, err.Error()))
		}
	}
	return errs
}
