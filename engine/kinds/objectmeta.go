package kinds

import (
	"time"
	"unicode/utf8"

	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectMeta decodes obj's metadata as the library's
// GetObjectMetaWithOptions does (a strict JSON round trip into
// metav1.ObjectMeta), unless canonicalMeta can canonicalize it directly:
// then it returns that canonical form in canonical and no ObjectMeta.
// Either way errors and unknown-field paths are the library's own, since
// only metadata canonicalMeta fully knows skips the library.
func objectMeta(obj map[string]any) (canonical map[string]any, meta *metav1.ObjectMeta, found bool, unknown []string, err error) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		if c, ok := canonicalMeta(md); ok {
			return c, nil, true, nil, nil
		}
	}
	meta, found, unknown, err = schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	return nil, meta, found, unknown, err
}

// setObjectMeta writes back what objectMeta returned, as the library's
// SetObjectMeta does.
func setObjectMeta(obj map[string]any, canonical map[string]any, meta *metav1.ObjectMeta, found bool) error {
	if canonical != nil {
		obj["metadata"] = canonical
		return nil
	}
	if !found {
		return nil
	}
	return schemaobjectmeta.SetObjectMeta(obj, meta)
}

// canonicalMeta returns md as metav1.ObjectMeta encodes it after decoding:
// empty fields left out, timestamps in UTC at second precision. It reports
// false, and the caller takes the library's path, for anything other than
// these fields with these types (as a request or an Unstructured setter
// gives them): strings; generation and deletionGracePeriodSeconds as
// int64; labels and annotations as objects of strings; finalizers as an
// array of strings; timestamps as RFC 3339 strings of a non-zero time; all
// strings valid UTF-8 (JSON encoding would replace invalid bytes).
// ownerReferences as an array of objects of the fields canonicalOwnerReference
// knows. Unknown fields, null values and managedFields are left to the
// library.
func canonicalMeta(md map[string]any) (map[string]any, bool) {
	out := make(map[string]any, len(md))
	for k, v := range md {
		switch k {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			s, ok := v.(string)
			if !ok || !utf8.ValidString(s) {
				return nil, false
			}
			if s != "" {
				out[k] = s
			}
		case "generation":
			n, ok := v.(int64)
			if !ok {
				return nil, false
			}
			if n != 0 {
				out[k] = n
			}
		case "deletionGracePeriodSeconds":
			n, ok := v.(int64)
			if !ok {
				return nil, false
			}
			out[k] = n // a pointer: kept even when 0
		case "creationTimestamp", "deletionTimestamp":
			t, ok := metaTime(v)
			if !ok {
				return nil, false
			}
			out[k] = t.UTC().Format(time.RFC3339)
		case "labels", "annotations":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if len(m) == 0 {
				continue
			}
			c := make(map[string]any, len(m))
			for mk, mv := range m {
				s, ok := mv.(string)
				if !ok || !utf8.ValidString(mk) || !utf8.ValidString(s) {
					return nil, false
				}
				c[mk] = s
			}
			out[k] = c
		case "finalizers", "ownerReferences":
			elem := canonicalString
			if k == "ownerReferences" {
				elem = canonicalOwnerReference
			}
			c, ok := canonicalList(v, elem)
			if !ok {
				return nil, false
			}
			if len(c) > 0 {
				out[k] = c
			}
		default:
			return nil, false
		}
	}
	return out, true
}

// canonicalList returns v, an array, with each element as elem gives it;
// it reports false when v is not an array or elem reports false for an
// element.
func canonicalList(v any, elem func(any) (any, bool)) ([]any, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	c := make([]any, len(l))
	for i, e := range l {
		if c[i], ok = elem(e); !ok {
			return nil, false
		}
	}
	return c, true
}

// canonicalString returns v, a string of valid UTF-8; it reports false
// for anything else.
func canonicalString(v any) (any, bool) {
	s, ok := v.(string)
	return s, ok && utf8.ValidString(s)
}

// canonicalOwnerReference returns an owner reference as
// metav1.OwnerReference encodes it after decoding: apiVersion, kind, name
// and uid always (as strings, empty when missing), controller and
// blockOwnerDeletion when given (as booleans). It reports false for
// anything else (another field, another type, null).
func canonicalOwnerReference(v any) (any, bool) {
	ref, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := map[string]any{"apiVersion": "", "kind": "", "name": "", "uid": ""}
	for k, v := range ref {
		switch k {
		case "apiVersion", "kind", "name", "uid":
			s, ok := v.(string)
			if !ok || !utf8.ValidString(s) {
				return nil, false
			}
			out[k] = s
		case "controller", "blockOwnerDeletion":
			b, ok := v.(bool)
			if !ok {
				return nil, false
			}
			out[k] = b
		default:
			return nil, false
		}
	}
	return out, true
}

// metaTime returns the time of a metadata timestamp given as an RFC 3339
// string of a non-zero time; it reports false for anything else.
func metaTime(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}
