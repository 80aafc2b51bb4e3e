package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kjson "sigs.k8s.io/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// A built-in kind's object is decoded by kube-apiserver into its Go type,
// which drops the fields the type does not declare, at any depth, and
// reports each by its path (rules[0].verb, spec.versions[0].schema.
// openAPIV3Schema.properties.size.typo) to fieldValidation. Setpoint finds
// them as kube-apiserver does: it decodes the object's JSON into the same
// Go type with the same strict decoder (sigs.k8s.io/json), which reports
// the same paths; a type's own UnmarshalJSON (quantities, times, a CRD
// schema's items) is its own business in both. An object is decoded only
// when a walk of its API's structured-merge-diff schema, which costs a
// fifth of the decoding and allocates nothing, finds in it an unknown
// field or a value the decoder may refuse: nearly every object is well
// formed, and passes with the walk alone.

// typedFields is what the unknown fields of a built-in kind's objects are
// found with: its Go type, and its top-level fields that cannot hold an
// object (a ConfigMap's data, a Secret's type), which are left out of the
// decoding since nothing below them can be unknown (and a Secret's data
// would be base64-decoded for nothing).
type typedFields struct {
	typ      reflect.Type
	noFields map[string]bool
	// fieldTypes are the Go types of the noFields.
	fieldTypes map[string]reflect.Type
	// schema types the kind's objects by its API's structured-merge-diff
	// schema (builtintypes.go), made on first use; nil if the API has none
	// for the kind.
	schemaOnce sync.Once
	schema     *builtinTypes
	// encode makes each object's fields other than apiVersion, kind and
	// metadata what the Go type encodes them to, as kube-apiserver stores
	// an object of a type whose encoding it serves (an Event's unset
	// timestamps as null, reportingInstance as ""), from the same decoding
	// that finds its unknown fields.
	encode bool
	// selfDecoding is whether the type holds a CRD schema's items,
	// additionalProperties, additionalItems or dependencies (see
	// reencodeSchemas).
	selfDecoding bool
}

// schemaUnions are the types of a CRD schema that decode themselves, with
// the lenient decoder (k8s.io/apimachinery/pkg/util/json): the strict
// decoder that calls them reports no unknown field inside them, and
// kube-apiserver, which stores the object as its Go type encodes it, drops
// those fields without a word, under fieldValidation=Strict too.
var schemaUnions = map[reflect.Type]bool{
	reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrArray]():       true,
	reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrBool]():        true,
	reflect.TypeFor[apiextensionsv1.JSONSchemaPropsOrStringArray](): true,
}

// unionHolders caches holdsSchemaUnions by type: reencodeSchemas asks it of
// every field of every schema node it walks.
var unionHolders sync.Map // reflect.Type -> bool

// holdsUnions is holdsSchemaUnions, cached.
func holdsUnions(t reflect.Type) bool {
	if v, ok := unionHolders.Load(t); ok {
		return v.(bool)
	}
	holds := holdsSchemaUnions(t, map[reflect.Type]bool{})
	unionHolders.Store(t, holds)
	return holds
}

// holdsSchemaUnions reports whether a value of type t may hold one of
// schemaUnions.
func holdsSchemaUnions(t reflect.Type, seen map[reflect.Type]bool) bool {
	if schemaUnions[t] {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return holdsSchemaUnions(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return false
		}
		seen[t] = true
		for i := range t.NumField() {
			if holdsSchemaUnions(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// reencodeSchemas replaces each value in v, the JSON of which typed is
// the decoding, that decoded into one of schemaUnions with what that
// decoding encodes to: without the fields it dropped, as kube-apiserver
// stores it.
func reencodeSchemas(v any, typed reflect.Value) any {
	for typed.Kind() == reflect.Pointer || typed.Kind() == reflect.Interface {
		if typed.IsNil() {
			return v
		}
		typed = typed.Elem()
	}
	if schemaUnions[typed.Type()] {
		b, err := json.Marshal(typed.Interface())
		var out any
		if err != nil || utiljson.Unmarshal(b, &out) != nil {
			return v
		}
		return out
	}
	switch v := v.(type) {
	case map[string]any:
		switch typed.Kind() {
		case reflect.Struct:
			t := typed.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case f.Anonymous && (name == "" || strings.Contains(opts, "inline")):
					reencodeSchemas(v, typed.Field(i))
				case name == "" || name == "-" || name == "metadata":
				default:
					if e, ok := v[name]; ok && holdsUnions(f.Type) {
						v[name] = reencodeSchemas(e, typed.Field(i))
					}
				}
			}
		case reflect.Map:
			if typed.Type().Key().Kind() != reflect.String {
				return v
			}
			for k, e := range v {
				if ev := typed.MapIndex(reflect.ValueOf(k).Convert(typed.Type().Key())); ev.IsValid() {
					v[k] = reencodeSchemas(e, ev)
				}
			}
		}
	case []any:
		if typed.Kind() == reflect.Slice && typed.Len() == len(v) {
			for i := range v {
				v[i] = reencodeSchemas(v[i], typed.Index(i))
			}
		}
	}
	return v
}

// schemaOf returns the typing of sv's objects by its API's schema, made
// (and the schema parsed) on first use; nil when the API has no schema
// for sv's kind.
func (tf *typedFields) schemaOf(sv *Kind) *builtinTypes {
	tf.schemaOnce.Do(func() {
		if bt, ok := newBuiltinTypes(sv); ok {
			tf.schema = &bt
		}
	})
	return tf.schema
}

// newTypedFields returns the typing of objects of the struct type of
// typed, a pointer to it; nil when typed is nil.
func newTypedFields(typed any) *typedFields {
	if typed == nil {
		return nil
	}
	t := reflect.TypeOf(typed).Elem()
	tf := &typedFields{typ: t, noFields: map[string]bool{}, fieldTypes: map[string]reflect.Type{},
		selfDecoding: holdsSchemaUnions(t, map[reflect.Type]bool{})}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		if !holdsObjects(f.Type) {
			tf.noFields[name] = true
			tf.fieldTypes[name] = f.Type
		}
	}
	return tf
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// holdsObjects reports whether a value of type t may hold a struct the
// decoder fills field by field: one that does not decode itself.
func holdsObjects(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return !reflect.PointerTo(t).Implements(jsonUnmarshaler)
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 && holdsObjects(t.Elem())
	case reflect.Pointer, reflect.Array, reflect.Map:
		return holdsObjects(t.Elem())
	case reflect.Interface:
		return true
	}
	return false
}

// prune deletes from obj the fields its Go type does not declare, below
// metadata (which objectMeta coerces) at any depth, and returns their
// paths as kube-apiserver's strict decoder spells them, sorted. An object
// that does not decode into the type (a string for a list, a number for a
// string) gets the decoder's error, as kube-apiserver's decoder gives it,
// and nothing is pruned. schema returns the kind's structured-merge-diff
// typing (schemaOf): an object it finds no unknown field nor mistyped
// value in (all but a few) is not decoded, and one with nothing but
// metadata and plain fields that hold no object (a namespace or a
// ServiceAccount as the server makes them) needs neither. A kind whose
// objects are encoded again (tf.encode) is always decoded.
func (tf *typedFields) prune(obj map[string]any, schema func() *builtinTypes) (unknown []string, err error) {
	if !tf.encode && tf.plainFields(obj) {
		if !tf.holdsTyped(obj) {
			return nil, nil
		}
		if s := schema(); s != nil && !s.hasUnknown(obj, tf.noFields) {
			return nil, nil
		}
	}
	return tf.pruneDecoded(obj, false)
}

// pruneDecoded is prune without the walk: it decodes obj into the Go type,
// whatever obj holds; with whole, the members that hold no object too,
// even those plainField passes (the exact answer, which prune's tests
// check it against).
func (tf *typedFields) pruneDecoded(obj map[string]any, whole bool) (unknown []string, err error) {
	data, err := marshalMembers(obj, func(k string, v any) bool {
		return k != "metadata" && (whole || tf.encode || !tf.noFields[k] || !tf.plainField(k, v))
	})
	if err != nil {
		return nil, err
	}
	typed := reflect.New(tf.typ).Interface()
	strict, err := kjson.UnmarshalStrict(data, typed, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	for _, e := range strict {
		var fe kjson.FieldError
		if errors.As(e, &fe) && deletePath(obj, fe.FieldPath()) {
			unknown = append(unknown, fe.FieldPath())
		}
	}
	slices.Sort(unknown)
	if !tf.encode && tf.selfDecoding {
		reencodeSchemas(obj, reflect.ValueOf(typed).Elem())
	}
	if tf.encode {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			return nil, err
		}
		setBody(obj, m)
	}
	return unknown, nil
}

// marshalMembers returns the JSON of the members of obj that keep
// reports true for, as encoding/json writes that object but for integral
// floats, written 1.0 (objjson.AppendMarkingFloats), so that the decoder
// refuses them in an integer field as it refuses a request's 1.0: without
// reflection when they hold only the types JSON decoding produces
// (objjson), through encoding/json otherwise.
func marshalMembers(obj map[string]any, keep func(k string, v any) bool) ([]byte, error) {
	keys := make([]string, 0, len(obj))
	for k, v := range obj {
		if keep(k, v) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b := make([]byte, 0, 512)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = objjson.AppendString(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = objjson.AppendMarkingFloats(b, obj[k]); !ok {
			in := make(map[string]any, len(keys))
			for _, k := range keys {
				in[k] = obj[k]
			}
			return json.Marshal(in)
		}
	}
	return append(b, '}'), nil
}

// setBody replaces obj's fields other than apiVersion, kind and metadata
// with body's, in place: the members both have are overwritten, not
// deleted and added again.
func setBody(obj, body map[string]any) {
	for k := range obj {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			if _, ok := body[k]; !ok {
				delete(obj, k)
			}
		}
	}
	for k, v := range body {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			obj[k] = v
		}
	}
}

// decode returns the error of decoding obj, metadata and all, into the
// Go type; nil when it decodes.
func (tf *typedFields) decode(obj map[string]any) error {
	data, err := marshalMembers(obj, func(string, any) bool { return true })
	if err != nil {
		return err
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(tf.typ).Interface())
}

// holdsTyped reports whether obj has a member the Go type may drop or
// refuse and plainFields does not look at: one other than metadata, the
// strings apiVersion and kind, and the members that hold no object.
func (tf *typedFields) holdsTyped(obj map[string]any) bool {
	for k, v := range obj {
		switch {
		case k == "metadata" || tf.noFields[k]:
		case k == "apiVersion" || k == "kind":
			if _, ok := v.(string); !ok {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// plainFields reports whether every member of obj that cannot hold an
// object (tf.noFields) decodes into its field as it is.
func (tf *typedFields) plainFields(obj map[string]any) bool {
	for k := range tf.noFields {
		if v, ok := obj[k]; ok && !tf.plainField(k, v) {
			return false
		}
	}
	return true
}

// plainField reports whether v, the value of obj's member k, which
// cannot hold an object, decodes into k's field without an error; one
// that does not is decoded with the rest, for the decoder's error.
func (tf *typedFields) plainField(k string, v any) bool {
	f, ok := tf.fieldTypes[k]
	return !ok || decodesAs(v, f)
}

// decodesAs reports whether the JSON value v decodes into a value of
// type t without an error, for the types of fields that hold no object:
// scalars, and lists and maps of them. A []byte is base64 in JSON. A type
// that decodes itself, or any other, is said not to, and is decoded.
func decodesAs(v any, t reflect.Type) bool {
	if v == nil {
		return true
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer:
		return decodesAs(v, t.Elem())
	case reflect.String:
		_, ok := v.(string)
		return ok
	case reflect.Bool:
		_, ok := v.(bool)
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		return ok && !reflect.Zero(t).OverflowInt(n)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := v.(string)
			return ok && plainBase64(s)
		}
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			if !decodesAs(e, t.Elem()) {
				return false
			}
		}
		return true
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return false
		}
		for _, e := range m {
			if !decodesAs(e, t.Elem()) {
				return false
			}
		}
		return true
	}
	return false
}

// plainBase64 reports whether s is padded standard base64 with nothing
// else in it (no line breaks, which the decoder skips), which decodes
// without an error; it allocates nothing. One it says no to may decode
// still: the decoder is asked.
func plainBase64(s string) bool {
	if len(s)%4 != 0 {
		return false
	}
	n := len(s)
	if n > 0 && s[n-1] == '=' {
		n--
		if n > 0 && s[n-1] == '=' {
			n--
		}
	}
	for i := 0; i < n; i++ {
		if !base64Alphabet[s[i]] {
			return false
		}
	}
	return true
}

// base64Alphabet holds the letters of standard base64.
var base64Alphabet = func() (a [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		a[c] = true
	}
	return a
}()

// DecodeError is kube-apiserver's answer to an object of kind k that does
// not decode into its type: 400 BadRequest, with the decoder's error,
// which DecodeCause finds in it.
func (k *Kind) DecodeError(err error) error {
	return &decodeError{
		StatusError: apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
			k.Kind, k.GVR.Version, k.Kind, err)),
		cause: err,
	}
}

// decodeError is the answer DecodeError gives, with its cause.
type decodeError struct {
	*apierrors.StatusError
	cause error
}

// DecodeCause returns the decoder's error in err when err is an object's
// DecodeError: a patch that makes an object that does not decode is
// answered otherwise (see the engine's Patch).
func DecodeCause(err error) (error, bool) {
	var de *decodeError
	if errors.As(err, &de) {
		return de.cause, true
	}
	return nil, false
}

// ConvertError returns the error of converting obj, a patched object of
// kind k, into k's Go type with the unstructured converter, as
// kube-apiserver converts the result of a strategic merge patch; nil when
// it converts, or when k has no Go type.
func (k *Kind) ConvertError(obj map[string]any) error {
	if k.typed == nil {
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, reflect.New(k.typed.typ).Interface())
}

// deletePath deletes the member at path, spelled as the strict decoder
// spells it (keys joined by ".", list indexes as "[i]"), from v, and reports
// whether it was there. A key may hold a dot itself (a CRD schema's
// property "a.b"), so each prefix of path that ends before a "." or "["
// is tried as a key, shortest first.
func deletePath(v any, path string) bool {
	switch v := v.(type) {
	case map[string]any:
		for i := 0; i < len(path); i++ {
			if c := path[i]; c != '.' && c != '[' {
				continue
			}
			e, ok := v[path[:i]]
			if !ok {
				continue
			}
			rest := path[i:]
			if rest[0] == '.' {
				rest = rest[1:]
			}
			if deletePath(e, rest) {
				return true
			}
		}
		if _, ok := v[path]; ok {
			delete(v, path)
			return true
		}
	case []any:
		j := strings.IndexByte(path, ']')
		if len(path) == 0 || path[0] != '[' || j < 0 {
			return false
		}
		i, err := strconv.Atoi(path[1:j])
		if err != nil || i < 0 || i >= len(v) {
			return false
		}
		rest := path[j+1:]
		if rest == "" {
			return false
		}
		if rest[0] == '.' {
			rest = rest[1:]
		}
		return deletePath(v[i], rest)
	}
	return false
}
