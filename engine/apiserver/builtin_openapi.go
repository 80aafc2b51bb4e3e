package apiserver

import (
	"bytes"
	"reflect"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The built-in kinds have no CRD, so their OpenAPI v3 documents are built
// from stand-in CRDs with the same names and a schema derived from their Go
// types: every field with its JSON name, type and the API's own description
// (the types' SwaggerDoc, or the generated OpenAPI definitions of the
// apiextensions types); what `kubectl explain` shows for them. The core
// group's document is then renamed to the paths and model names Kubernetes
// uses.

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
		standIn("", "namespaces", "namespace", "Namespace", apiextensionsv1.ClusterScoped, kindSchema(corev1.Namespace{})),
		standIn("", "events", "event", "Event", apiextensionsv1.NamespaceScoped, kindSchema(corev1.Event{})),
		standIn("apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition",
			apiextensionsv1.ClusterScoped, kindSchema(apiextensionsv1.CustomResourceDefinition{})),
		noStatus(standIn("rbac.authorization.k8s.io", "roles", "role", "Role", apiextensionsv1.NamespaceScoped, kindSchema(rbacv1.Role{}))),
		noStatus(standIn("rbac.authorization.k8s.io", "clusterroles", "clusterrole", "ClusterRole", apiextensionsv1.ClusterScoped, kindSchema(rbacv1.ClusterRole{}))),
		noStatus(standIn("rbac.authorization.k8s.io", "rolebindings", "rolebinding", "RoleBinding", apiextensionsv1.NamespaceScoped, kindSchema(rbacv1.RoleBinding{}))),
		noStatus(standIn("rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", apiextensionsv1.ClusterScoped, kindSchema(rbacv1.ClusterRoleBinding{}))),
		standIn("", "serviceaccounts", "serviceaccount", "ServiceAccount", apiextensionsv1.NamespaceScoped, kindSchema(corev1.ServiceAccount{})),
		noStatus(standIn("", "secrets", "secret", "Secret", apiextensionsv1.NamespaceScoped, kindSchema(corev1.Secret{}))),
		noStatus(standIn("", "configmaps", "configmap", "ConfigMap", apiextensionsv1.NamespaceScoped, kindSchema(corev1.ConfigMap{}))),
	}
}

// kindSchema is the schema of a kind's Go type, without apiVersion, kind
// and metadata, which the OpenAPI builder adds.
func kindSchema(v any) apiextensionsv1.JSONSchemaProps {
	t := reflect.TypeOf(v)
	return typeSchema(t, typeDoc(t)[""], map[reflect.Type]bool{})
}

// openValue is a schema that takes any JSON value.
func openValue(desc string) apiextensionsv1.JSONSchemaProps {
	yes := true
	return apiextensionsv1.JSONSchemaProps{Description: desc, XPreserveUnknownFields: &yes}
}

var (
	timeType     = reflect.TypeFor[metav1.Time]()
	microType    = reflect.TypeFor[metav1.MicroTime]()
	durationType = reflect.TypeFor[metav1.Duration]()
	typeMetaType = reflect.TypeFor[metav1.TypeMeta]()
	objMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	intStrType   = reflect.TypeFor[intstr.IntOrString]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	// Types with a JSON form of their own: any value.
	openTypes = map[reflect.Type]bool{
		reflect.TypeFor[apiextensionsv1.JSON]():                         true,
		reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrArray]():       true,
		reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrBool]():        true,
		reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrStringArray](): true,
		reflect.TypeFor[runtime.RawExtension]():                         true,
		reflect.TypeFor[metav1.FieldsV1]():                              true,
	}
)

// typeSchema is the schema of t's JSON form. A type already being described
// further up (JSONSchemaProps holds JSONSchemaProps) is any value there.
func typeSchema(t reflect.Type, desc string, stack map[reflect.Type]bool) apiextensionsv1.JSONSchemaProps {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType || t == microType:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time", Description: desc}
	case t == durationType:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	case t == intStrType || t == quantityType:
		return apiextensionsv1.JSONSchemaProps{XIntOrString: true, Description: desc}
	case openTypes[t] || stack[t]:
		return openValue(desc)
	}
	switch t.Kind() {
	case reflect.String:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	case reflect.Bool:
		return apiextensionsv1.JSONSchemaProps{Type: "boolean", Description: desc}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc}
	case reflect.Int64, reflect.Uint, reflect.Uint64:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64", Description: desc}
	case reflect.Float32, reflect.Float64:
		return apiextensionsv1.JSONSchemaProps{Type: "number", Description: desc}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte", Description: desc}
		}
		items := typeSchema(t.Elem(), "", stack)
		return apiextensionsv1.JSONSchemaProps{Type: "array", Description: desc, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
	case reflect.Map:
		values := typeSchema(t.Elem(), "", stack)
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc,
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &values}}
	case reflect.Struct:
		stack[t] = true
		defer delete(stack, t)
		out := apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc, Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		addFields(&out, t, stack)
		return out
	}
	return openValue(desc)
}

// addFields adds the JSON fields of struct type t to out, those of inlined
// structs included; apiVersion, kind and metadata are left to the builder.
func addFields(out *apiextensionsv1.JSONSchemaProps, t reflect.Type, stack map[reflect.Type]bool) {
	docs := typeDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type == typeMetaType || f.Type == objMetaType {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && (opts == "inline" || f.Anonymous) && f.Type.Kind() == reflect.Struct {
			addFields(out, f.Type, stack)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out.Properties[name] = typeSchema(f.Type, docs[name], stack)
	}
}

// typeDoc returns the descriptions of t and its fields ("" for t itself):
// from its SwaggerDoc method, or from the generated OpenAPI definitions of
// the apiextensions types.
func typeDoc(t reflect.Type) map[string]string {
	v := reflect.New(t).Elem().Interface()
	if d, ok := v.(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	named, ok := v.(interface{ OpenAPIModelName() string })
	if !ok {
		return nil
	}
	def, ok := apiextensionsDefs()[named.OpenAPIModelName()]
	if !ok {
		return nil
	}
	docs := map[string]string{"": def.Schema.Description}
	for name, p := range def.Schema.Properties {
		docs[name] = p.Description
	}
	return docs
}

// apiextensionsDefs are the generated OpenAPI definitions of the
// apiextensions types, by model name.
var apiextensionsDefs = sync.OnceValue(func() map[string]common.OpenAPIDefinition {
	return extopenapi.GetOpenAPIDefinitions(func(path string) spec.Ref { return spec.MustCreateRef("#/definitions/" + path) })
})

// renameCore turns the stand-in document of the core group into the paths
// and model names Kubernetes serves it with.
func renameCore(doc []byte) []byte {
	doc = bytes.ReplaceAll(doc, []byte(`"/apis//v1/`), []byte(`"/api/v1/`))
	doc = bytes.ReplaceAll(doc, []byte(`"#/components/schemas/.v1.`), []byte(`"#/components/schemas/io.k8s.api.core.v1.`))
	return bytes.ReplaceAll(doc, []byte(`".v1.`), []byte(`"io.k8s.api.core.v1.`))
}
