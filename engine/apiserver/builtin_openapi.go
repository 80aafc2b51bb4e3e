package apiserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	extopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	endpointsopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/setpoint-dev/setpoint/engine/kinds/builtinopenapi"
)

// The built-in kinds' OpenAPI v3 documents are made as kube-apiserver makes
// them: every Go type a model of its own in components.schemas, from the
// generated OpenAPI definitions of k8s.io/api (engine/kinds/builtinopenapi)
// and of the apiextensions and apimachinery types, a field of another type
// a reference to its model (allOf with the field's description), each
// kind's model tagged with its group, version and kind. kubectl explain
// follows those references and names each field's type after its model.
// The paths come from the apiextensions builder run on a stand-in CRD of
// each kind, their references renamed to the kinds' models.

// builtinKind is a built-in kind with an OpenAPI document: its names, and
// its Go type and list type (none for a review kind), whose models
// describe it.
type builtinKind struct {
	group, plural, singular string
	scope                   apiextensionsv1.ResourceScope
	status                  bool // whether it has a status subresource
	obj, list               runtime.Object
	// byCRD says a CRD of the server's own serves the kind, one Kubernetes
	// builds in: its document is this one, while that CRD serves it.
	byCRD bool
}

// review is a review kind: created only, never stored, without a list.
func review(group, plural string, scope apiextensionsv1.ResourceScope, obj runtime.Object) builtinKind {
	return builtinKind{group: group, plural: plural, singular: strings.TrimSuffix(plural, "s"), scope: scope, obj: obj}
}

// builtinKinds are the built-in kinds the server describes.
var builtinKinds = []builtinKind{
	{"", "namespaces", "namespace", apiextensionsv1.ClusterScoped, true, &corev1.Namespace{}, &corev1.NamespaceList{}, false},
	{"", "events", "event", apiextensionsv1.NamespaceScoped, false, &corev1.Event{}, &corev1.EventList{}, false},
	{"", "serviceaccounts", "serviceaccount", apiextensionsv1.NamespaceScoped, false, &corev1.ServiceAccount{}, &corev1.ServiceAccountList{}, false},
	{"", "secrets", "secret", apiextensionsv1.NamespaceScoped, false, &corev1.Secret{}, &corev1.SecretList{}, false},
	{"", "configmaps", "configmap", apiextensionsv1.NamespaceScoped, false, &corev1.ConfigMap{}, &corev1.ConfigMapList{}, false},
	{"apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition", apiextensionsv1.ClusterScoped, true,
		&apiextensionsv1.CustomResourceDefinition{}, &apiextensionsv1.CustomResourceDefinitionList{}, false},
	{"rbac.authorization.k8s.io", "roles", "role", apiextensionsv1.NamespaceScoped, false, &rbacv1.Role{}, &rbacv1.RoleList{}, false},
	{"rbac.authorization.k8s.io", "clusterroles", "clusterrole", apiextensionsv1.ClusterScoped, false, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{}, false},
	{"rbac.authorization.k8s.io", "rolebindings", "rolebinding", apiextensionsv1.NamespaceScoped, false, &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, false},
	{"rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebinding", apiextensionsv1.ClusterScoped, false,
		&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}, false},
	{"events.k8s.io", "events", "event", apiextensionsv1.NamespaceScoped, false, &eventsv1.Event{}, &eventsv1.EventList{}, false},
	{"coordination.k8s.io", "leases", "lease", apiextensionsv1.NamespaceScoped, false, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}, true},
	review("authentication.k8s.io", "selfsubjectreviews", apiextensionsv1.ClusterScoped, &authenticationv1.SelfSubjectReview{}),
	review("authorization.k8s.io", "localsubjectaccessreviews", apiextensionsv1.NamespaceScoped, &authorizationv1.LocalSubjectAccessReview{}),
	review("authorization.k8s.io", "selfsubjectaccessreviews", apiextensionsv1.ClusterScoped, &authorizationv1.SelfSubjectAccessReview{}),
	review("authorization.k8s.io", "selfsubjectrulesreviews", apiextensionsv1.ClusterScoped, &authorizationv1.SelfSubjectRulesReview{}),
	review("authorization.k8s.io", "subjectaccessreviews", apiextensionsv1.ClusterScoped, &authorizationv1.SubjectAccessReview{}),
}

// describedByCRD tells whether the served version version of crd is a
// built-in kind's, which the built-in documents describe.
func describedByCRD(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	return version == "v1" && slices.ContainsFunc(builtinKinds, func(k builtinKind) bool {
		return k.byCRD && k.group == crd.Spec.Group && k.plural == crd.Spec.Names.Plural && k.kind() == crd.Spec.Names.Kind
	})
}

func (k builtinKind) kind() string { return reflect.TypeOf(k.obj).Elem().Name() }

// modelName is the name of the model of obj's type.
func modelName(obj runtime.Object) string {
	return obj.(interface{ OpenAPIModelName() string }).OpenAPIModelName()
}

// standIn is a CRD with k's names, for the apiextensions builder to make
// k's paths from; its schema is left out of the document.
func (k builtinKind) standIn() *apiextensionsv1.CustomResourceDefinition {
	kind := k.kind()
	v := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: "v1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
	}
	if k.status {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: k.plural + "." + k.group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: k.group, Scope: k.scope,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: k.plural, Singular: k.singular, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{v},
		},
	}
}

// builtinDocs are the OpenAPI v3 documents of the built-in kinds' group
// versions; byCRD marks those of kinds a CRD serves (builtinKind.byCRD),
// served only while it does.
type builtinDocs struct {
	docs  map[schema.GroupVersion]*spec3.OpenAPI
	byCRD map[schema.GroupVersion]bool
}

// builtinDocuments makes the built-in kinds' documents, once: the built-in
// kinds never change.
var builtinDocuments = sync.OnceValues(func() (*builtinDocs, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme, coordinationv1.AddToScheme, eventsv1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("openapi scheme: %w", err)
		}
	}
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(name))
	}
	defs := extopenapi.GetOpenAPIDefinitions(ref)
	maps.Copy(defs, builtinopenapi.GetOpenAPIDefinitions(ref))
	namer := endpointsopenapi.NewDefinitionNamer(scheme)

	docs := map[schema.GroupVersion]*spec3.OpenAPI{}
	refs := map[schema.GroupVersion]map[string]bool{}
	for _, k := range builtinKinds {
		gv := schema.GroupVersion{Group: k.group, Version: "v1"}
		o3, err := builder.BuildOpenAPIV3(k.standIn(), "v1", builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("openapi v3 of %s: %w", k.plural, err)
		}
		doc := docs[gv]
		if doc == nil {
			doc = &spec3.OpenAPI{
				Version:    o3.Version,
				Info:       o3.Info,
				Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
				Components: &spec3.Components{Schemas: map[string]*spec.Schema{}},
			}
			docs[gv], refs[gv] = doc, map[string]bool{}
		}
		rename := map[string]string{}
		for name, s := range o3.Components.Schemas {
			switch gvkOf(s) {
			case gv.WithKind(k.kind()):
				rename[name] = modelName(k.obj)
			case gv.WithKind(k.kind() + "List"):
				if k.list != nil {
					rename[name] = modelName(k.list)
				}
			}
		}
		for p, item := range o3.Paths.Paths {
			if k.group == "" {
				p = "/api/" + strings.TrimPrefix(p, "/apis//")
			}
			if k.list == nil {
				// A review kind is only created.
				if item.Post == nil {
					continue
				}
				item.Get, item.Put, item.Delete, item.Patch = nil, nil, nil, nil
			}
			renameRefs(item, rename, refs[gv])
			doc.Paths.Paths[p] = item
		}
	}
	for gv, doc := range docs {
		names := make([]string, 0, len(refs[gv]))
		for n := range refs[gv] {
			names = append(names, n)
		}
		sort.Strings(names)
		schemas, err := builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
			Definitions:       defs,
			GetDefinitionName: namer.GetDefinitionName,
		}, names...)
		if err != nil {
			return nil, fmt.Errorf("openapi v3 models of %s: %w", gv, err)
		}
		doc.Components.Schemas = schemas
	}
	byCRD := map[schema.GroupVersion]bool{}
	for _, k := range builtinKinds {
		byCRD[schema.GroupVersion{Group: k.group, Version: "v1"}] = k.byCRD
	}
	return &builtinDocs{docs: docs, byCRD: byCRD}, nil
})

// gvkOf returns the group, version and kind a model is tagged with, the
// first of them, or the zero value. The builder tags a kind's model with a
// list of maps of any values, its list's model with one of strings.
func gvkOf(s *spec.Schema) schema.GroupVersionKind {
	b, err := json.Marshal(s.Extensions["x-kubernetes-group-version-kind"])
	var tags []schema.GroupVersionKind
	if err != nil || json.Unmarshal(b, &tags) != nil || len(tags) == 0 {
		return schema.GroupVersionKind{}
	}
	return tags[0]
}

// renameRefs points the references of item's request and response bodies
// to the models rename names, and records the models they name in seen.
func renameRefs(item *spec3.Path, rename map[string]string, seen map[string]bool) {
	const prefix = "#/components/schemas/"
	fix := func(content map[string]*spec3.MediaType) {
		for _, mt := range content {
			if mt == nil || mt.Schema == nil {
				continue
			}
			name, ok := strings.CutPrefix(mt.Schema.Ref.String(), prefix)
			if !ok {
				continue
			}
			if to, ok := rename[name]; ok {
				name = to
				mt.Schema = &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(prefix + common.EscapeJsonPointer(to))}}
			}
			seen[name] = true
		}
	}
	for _, op := range []*spec3.Operation{item.Get, item.Put, item.Post, item.Delete, item.Options, item.Head, item.Patch, item.Trace} {
		if op == nil {
			continue
		}
		if op.RequestBody != nil {
			fix(op.RequestBody.Content)
		}
		if op.Responses == nil {
			continue
		}
		if op.Responses.Default != nil {
			fix(op.Responses.Default.Content)
		}
		for _, r := range op.Responses.StatusCodeResponses {
			if r != nil {
				fix(r.Content)
			}
		}
	}
}
