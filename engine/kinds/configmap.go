package kinds

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ConfigMapResource is core/v1 ConfigMaps: configuration as text (data)
// and bytes (binaryData), served as kube-apiserver serves them.
var ConfigMapResource = corev1.SchemeGroupVersion.WithResource("configmaps")

var configMapFields = []string{"data", "binaryData", "immutable"}

// newConfigMapKind is the ConfigMap kind: namespaced, no status, named by
// a DNS subdomain, with Kubernetes' validation and table.
func newConfigMapKind() *Kind {
	k := newBuiltin(ConfigMapResource, "ConfigMap", "configmap", true, false,
		apivalidation.NameIsDNSSubdomain, validateConfigMap, nil, &corev1.ConfigMap{}, configMapFields, "cm")
	k.table = dataTable{}
	return k
}

// validateConfigMap is Kubernetes' ValidateConfigMap and, with old,
// ValidateConfigMapUpdate: keys of data and binaryData are config keys and
// appear in only one of them, the two hold at most MaxSecretSize bytes, and
// an immutable ConfigMap keeps its data. Values are not quoted in errors.
func validateConfigMap(_ context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	m := obj.Object
	dataPath, binPath := field.NewPath("data"), field.NewPath("binaryData")
	var errs field.ErrorList
	data := map[string]string{}
	if v, ok := m["data"]; ok && v != nil {
		var isMap bool
		if data, isMap = stringMap(v); !isMap {
			errs = append(errs, field.Invalid(dataPath, redacted, "must be a map of strings"))
		}
	}
	bin, berrs := bytesMap(m, "binaryData")
	errs = append(errs, berrs...)
	immutable, ierrs := optionalBool(m, "immutable")
	errs = append(errs, ierrs...)
	kerrs, size := configKeys(data, dataPath)
	errs = append(errs, kerrs...)
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if _, dup := bin[k]; dup {
			errs = append(errs, field.Invalid(dataPath.Key(k), k, "duplicate of key present in binaryData"))
		}
	}
	kerrs, binSize := configKeys(bin, binPath)
	errs = append(errs, kerrs...)
	if size+binSize > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	if old == nil {
		return errs
	}
	if oldImmutable, _ := optionalBool(old.Object, "immutable"); oldImmutable != nil && *oldImmutable {
		if immutable == nil || !*immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		oldData, _ := stringMap(orEmpty(old.Object["data"]))
		if !maps.Equal(data, oldData) {
			errs = append(errs, field.Forbidden(dataPath, "field is immutable when `immutable` is set"))
		}
		oldBin, _ := bytesMap(old.Object, "binaryData")
		if !maps.EqualFunc(bin, oldBin, func(a, b []byte) bool { return string(a) == string(b) }) {
			errs = append(errs, field.Forbidden(binPath, "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// orEmpty is v, or an empty map for nil.
func orEmpty(v any) any {
	if v == nil {
		return map[string]any{}
	}
	return v
}
