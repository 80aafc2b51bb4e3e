package apiserver

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// noStatus drops the status subresource of a stand-in, for the built-in
// kinds that have none (the RBAC kinds).
func noStatus(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Subresources = nil
	}
	return crd
}
