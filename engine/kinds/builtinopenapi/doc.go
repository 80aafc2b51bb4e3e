// Package builtinopenapi holds the OpenAPI definitions of the built-in
// kinds' Go types (k8s.io/api core/v1, rbac/v1, coordination/v1, events/v1 and the
// review kinds of authentication/v1 and authorization/v1, and the
// apimachinery types they use: meta/v1, resource, runtime, intstr),
// generated from their sources by kube-openapi's openapi-gen, as Kubernetes generates its
// own: every type a model of its own with the API's descriptions, required
// fields, enums and list and map types, a field of another type a reference
// to that type's model. GetOpenAPIDefinitions returns them by model name
// (the types' OpenAPIModelName).
//
// To regenerate after k8s.io/api or k8s.io/kube-openapi changes version in
// go.mod, run `go generate ./engine/kinds/builtinopenapi` from the module
// root with the kube-openapi version of go.mod in the line below.
//
// The package imports only k8s.io libraries.
package builtinopenapi

//go:generate sh -c "cd ../../.. && go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --output-dir engine/kinds/builtinopenapi --output-pkg github.com/setpoint-dev/setpoint/engine/kinds/builtinopenapi --output-file zz_generated.openapi.go --report-filename /dev/null --readonly-pkg k8s.io/api/core/v1 --readonly-pkg k8s.io/api/rbac/v1 --readonly-pkg k8s.io/api/coordination/v1 --readonly-pkg k8s.io/api/events/v1 --readonly-pkg k8s.io/api/authentication/v1 --readonly-pkg k8s.io/api/authorization/v1 --readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 --readonly-pkg k8s.io/apimachinery/pkg/api/resource --readonly-pkg k8s.io/apimachinery/pkg/runtime --readonly-pkg k8s.io/apimachinery/pkg/util/intstr k8s.io/api/core/v1 k8s.io/api/rbac/v1 k8s.io/api/coordination/v1 k8s.io/api/events/v1 k8s.io/api/authentication/v1 k8s.io/api/authorization/v1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/util/intstr"
