package kinds

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SecretResource is core/v1 Secrets: credentials and keys, served as
// kube-apiserver serves them. Their values never appear in a validation
// error; the store may keep them encrypted (store/encrypt).
var SecretResource = corev1.SchemeGroupVersion.WithResource("secrets")

// secretFields are the top-level fields a Secret keeps; stringData is
// write-only, merged into data before anything is stored.
var secretFields = []string{"data", "stringData", "type", "immutable"}

// redacted stands for a secret value in an error, as in Kubernetes.
const redacted = "<secret contents redacted>"

// newSecretKind is the Secret kind: namespaced, no status, named by a DNS
// subdomain, with Kubernetes' defaults (type Opaque), stringData merged
// into data, its validation and the table kube-apiserver prints.
func newSecretKind() *Kind {
	k := newBuiltin(SecretResource, "Secret", "secret", true, false,
		apivalidation.NameIsDNSSubdomain, validateSecret, nil, &corev1.Secret{}, secretFields)
	k.strategy = secretStrategy{k.strategy.(builtinStrategy)}
	k.table = dataTable{secret: true}
	return k
}

// secretStrategy merges stringData into data and defaults the type before
// the builtin strategy runs, as Kubernetes' conversion and defaulting do on
// decoding: stringData is never stored or served.
type secretStrategy struct{ builtinStrategy }

func (s secretStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	prepareSecret(obj.(*unstructured.Unstructured).Object)
	s.builtinStrategy.PrepareForCreate(ctx, obj)
}

func (s secretStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	prepareSecret(obj.(*unstructured.Unstructured).Object)
	s.builtinStrategy.PrepareForUpdate(ctx, obj, old)
}

// prepareSecret merges stringData into data, its keys winning, and sets
// type to Opaque when it is missing or empty. A stringData or data that is
// not a map of strings is left for validation to refuse.
func prepareSecret(m map[string]any) {
	if t, ok := m["type"]; !ok || t == "" || t == nil {
		m["type"] = string(corev1.SecretTypeOpaque)
	}
	sd, ok := m["stringData"]
	if !ok {
		return
	}
	if sd == nil {
		delete(m, "stringData")
		return
	}
	strs, ok := stringMap(sd)
	if !ok {
		return
	}
	data := map[string]any{}
	switch d := m["data"].(type) {
	case nil:
	case map[string]any:
		data = d
	default:
		return
	}
	for k, v := range strs {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	m["data"] = data
	delete(m, "stringData")
}

// stringMap returns v as a map of strings, false when it is not one.
func stringMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

// bytesMap decodes the map of base64 strings at m[name], naming each bad
// value by its key alone: the value may be a secret.
func bytesMap(m map[string]any, name string) (map[string][]byte, field.ErrorList) {
	p := field.NewPath(name)
	v, ok := m[name]
	if !ok || v == nil {
		return nil, nil
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(p, redacted, "must be a map of base64-encoded strings")}
	}
	var errs field.ErrorList
	out := make(map[string][]byte, len(raw))
	for k, x := range raw {
		s, ok := x.(string)
		if !ok {
			errs = append(errs, field.Invalid(p.Key(k), redacted, "must be a base64-encoded string"))
			continue
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			errs = append(errs, field.Invalid(p.Key(k), redacted, "must be a base64-encoded string"))
			continue
		}
		out[k] = b
	}
	return out, errs
}

// optionalBool is m[name] when it is a bool, nil when it is absent.
func optionalBool(m map[string]any, name string) (*bool, field.ErrorList) {
	v, ok := m[name]
	if !ok || v == nil {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath(name), v, "must be a boolean")}
	}
	return &b, nil
}

// configKeys checks the keys of a data map with IsConfigMapKey and adds
// up the bytes of its values.
func configKeys[V string | []byte](data map[string]V, p *field.Path) (field.ErrorList, int) {
	var errs field.ErrorList
	size := 0
	for _, k := range slices.Sorted(maps.Keys(data)) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		size += len(data[k])
	}
	return errs, size
}

// validateSecret is Kubernetes' ValidateSecret and, with old,
// ValidateSecretUpdate: data keys are config keys, data is at most
// MaxSecretSize bytes, each type has the keys it needs, type cannot change
// and an immutable Secret's data cannot. No error carries a value of data.
func validateSecret(_ context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	m := obj.Object
	data, errs := bytesMap(m, "data")
	if _, ok := m["stringData"]; ok {
		errs = append(errs, field.Invalid(field.NewPath("stringData"), redacted, "must be a map of strings"))
	}
	typ, _ := m["type"].(string)
	if t, ok := m["type"]; ok && t != nil {
		if _, isString := t.(string); !isString {
			errs = append(errs, field.Invalid(field.NewPath("type"), t, "must be a string"))
		}
	}
	immutable, ierrs := optionalBool(m, "immutable")
	errs = append(errs, ierrs...)
	dataPath := field.NewPath("data")
	kerrs, size := configKeys(data, dataPath)
	errs = append(errs, kerrs...)
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", corev1.MaxSecretSize))
	}
	errs = append(errs, validateSecretType(corev1.SecretType(typ), data, obj.GetAnnotations(), dataPath)...)
	if old == nil {
		return errs
	}
	oldType, _ := old.Object["type"].(string)
	if typ != oldType {
		errs = append(errs, field.Invalid(field.NewPath("type"), typ, apivalidation.FieldImmutableErrorMsg))
	}
	if oldImmutable, _ := optionalBool(old.Object, "immutable"); oldImmutable != nil && *oldImmutable {
		if immutable == nil || !*immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		oldData, _ := bytesMap(old.Object, "data")
		if !maps.EqualFunc(data, oldData, bytes.Equal) {
			errs = append(errs, field.Forbidden(dataPath, "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// validateSecretType checks that a Secret of a well-known type has the
// keys that type needs, as Kubernetes does; other types need nothing.
func validateSecretType(typ corev1.SecretType, data map[string][]byte, annotations map[string]string, dataPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch typ {
	case corev1.SecretTypeServiceAccountToken:
		if annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, jsonKey(data, corev1.DockerConfigKey, dataPath)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, jsonKey(data, corev1.DockerConfigJsonKey, dataPath)...)
	case corev1.SecretTypeBasicAuth:
		_, user := data[corev1.BasicAuthUsernameKey]
		_, pass := data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

// jsonKey requires data[key] to be a JSON object (a Docker config); the
// error does not quote it.
func jsonKey(data map[string][]byte, key string, dataPath *field.Path) field.ErrorList {
	b, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(dataPath.Key(key), "")}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return field.ErrorList{field.Invalid(dataPath.Key(key), redacted, "must be a JSON object")}
	}
	return nil
}
