package engine

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The collector's watch decodes the metadata of every write in the store,
// so decodeGCMeta reads only what the graph keeps: it walks the document's
// bytes, skips everything but metadata (spec, status, managedFields, labels
// and annotations are stepped over by bracket matching, never decoded) and
// builds no map. A document it cannot walk is decoded with encoding/json.

// gcMeta is the part of a stored document's metadata the graph keeps.
type gcMeta struct {
	UID               types.UID               `json:"uid"`
	Name              string                  `json:"name"`
	Namespace         string                  `json:"namespace"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
	Finalizers        []string                `json:"finalizers"`
	DeletionTimestamp json.RawMessage         `json:"deletionTimestamp"`
}

// decodeGCMeta decodes the metadata of a stored document; false when the
// value is not an object document with a uid (module bytes, for one).
func decodeGCMeta(b []byte) (gcMeta, bool) {
	if m, ok := scanGCMeta(b); ok {
		return m, m.UID != ""
	}
	return exactGCMeta(b)
}

// exactGCMeta is decodeGCMeta through the engine's own decoding: the
// document as a map (the last of duplicate keys kept), its "metadata" member
// and, in it, the members of those exact names, as the engine reads them.
// Keys are matched exactly, never by case as encoding/json matches struct
// fields: a custom resource that keeps unknown fields may hold a "METADATA"
// of the user's, which must not pass for the object's own.
func exactGCMeta(b []byte) (gcMeta, bool) {
	doc, ok := exactDocument(b)
	if !ok {
		return gcMeta{}, false
	}
	md, _ := doc["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	m := gcMeta{UID: types.UID(str(md, "uid")), Name: str(md, "name"), Namespace: str(md, "namespace")}
	if fs, ok := md["finalizers"].([]any); ok {
		for _, f := range fs {
			if s, ok := f.(string); ok {
				m.Finalizers = append(m.Finalizers, s)
			}
		}
	}
	if dt := md["deletionTimestamp"]; dt != nil {
		m.DeletionTimestamp, _ = json.Marshal(dt)
	}
	if refs, ok := md["ownerReferences"].([]any); ok {
		for _, r := range refs {
			rm, ok := r.(map[string]any)
			if !ok {
				continue
			}
			ref := metav1.OwnerReference{APIVersion: str(rm, "apiVersion"), Kind: str(rm, "kind"), Name: str(rm, "name"), UID: types.UID(str(rm, "uid"))}
			if b, ok := rm["blockOwnerDeletion"].(bool); ok {
				ref.BlockOwnerDeletion = &b
			}
			m.OwnerReferences = append(m.OwnerReferences, ref)
		}
	}
	return m, m.UID != ""
}

// exactDocument decodes a stored document as the engine does; false when it
// is not a JSON object.
func exactDocument(b []byte) (map[string]any, bool) {
	if m, ok := DecodeJSONObject(b); ok {
		return m, true
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// scanGCMeta reads gcMeta from a JSON object without decoding the rest; false
// when the document is not one it handles (then exactGCMeta decides). Keys
// are matched exactly; of duplicate keys the last wins, as in exactGCMeta.
func scanGCMeta(b []byte) (m gcMeta, ok bool) {
	d := gcScan{b: b}
	ok = d.object(func(k string) bool {
		if k != "metadata" {
			return d.skip()
		}
		m = gcMeta{} // a later "metadata" replaces an earlier one
		return d.object(func(k string) bool {
			var ok bool
			switch k {
			case "uid":
				var s string
				s, ok = d.str()
				m.UID = types.UID(s)
			case "name":
				m.Name, ok = d.str()
			case "namespace":
				m.Namespace, ok = d.str()
			case "finalizers":
				m.Finalizers = nil
				ok = d.array(func() bool {
					s, ok := d.str()
					m.Finalizers = append(m.Finalizers, s)
					return ok
				})
			case "deletionTimestamp":
				d.space()
				start := d.i
				ok = d.skip()
				m.DeletionTimestamp = json.RawMessage(b[start:d.i])
			case "ownerReferences":
				m.OwnerReferences = nil
				ok = d.array(func() bool {
					var r metav1.OwnerReference
					ok := d.object(func(k string) bool {
						var ok bool
						switch k {
						case "apiVersion":
							r.APIVersion, ok = d.str()
						case "kind":
							r.Kind, ok = d.str()
						case "name":
							r.Name, ok = d.str()
						case "uid":
							var s string
							s, ok = d.str()
							r.UID = types.UID(s)
						case "blockOwnerDeletion":
							var v, null bool
							v, null, ok = d.boolean()
							r.BlockOwnerDeletion = nil
							if !null {
								r.BlockOwnerDeletion = &v
							}
						default:
							ok = d.skip()
						}
						return ok
					})
					m.OwnerReferences = append(m.OwnerReferences, r)
					return ok
				})
			default:
				ok = d.skip()
			}
			return ok
		})
	})
	d.space()
	return m, ok && d.i == len(b)
}

// gcScan walks JSON bytes.
type gcScan struct {
	b []byte
	i int
}

// rest is what is left to read.
func (d *gcScan) rest() []byte { return d.b[min(d.i, len(d.b)):] }

func (d *gcScan) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// object walks an object, calling member with the scanner on each value.
func (d *gcScan) object(member func(key string) bool) bool {
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return false
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return true
	}
	for {
		k, ok := d.str()
		if !ok {
			return false
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		if !member(k) {
			return false
		}
		d.space()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array walks an array (null is an empty one), calling elem on each element.
func (d *gcScan) array(elem func() bool) bool {
	d.space()
	if bytes.HasPrefix(d.rest(), []byte("null")) {
		d.i += 4
		return true
	}
	if d.i >= len(d.b) || d.b[d.i] != '[' {
		return false
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		d.space()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string; one with escapes or non-ASCII bytes is decoded by
// encoding/json.
func (d *gcScan) str() (string, bool) {
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i
	plain := true
	for d.i++; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '\\':
			plain = false
			d.i++
		case c == '"':
			d.i++
			if plain {
				return string(d.b[start+1 : d.i-1]), true
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		case c >= 0x80:
			plain = false
		}
	}
	return "", false
}

// boolean reads true, false or null.
func (d *gcScan) boolean() (v, null, ok bool) {
	d.space()
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(d.rest(), []byte(lit)) {
			d.i += len(lit)
			return lit == "true", lit == "null", true
		}
	}
	return false, false, false
}

// skip steps over one value. Containers are stepped over by matching
// brackets outside strings: stored documents are valid JSON.
func (d *gcScan) skip() bool {
	d.space()
	if d.i >= len(d.b) {
		return false
	}
	switch d.b[d.i] {
	case '"':
		return d.skipStr()
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if !d.skipStr() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.i++
					return true
				}
			}
			d.i++
		}
		return false
	default: // a number or a literal
		start := d.i
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return d.i > start
			}
			d.i++
		}
		return d.i > start
	}
}

func (d *gcScan) skipStr() bool {
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			d.i++
		case '"':
			d.i++
			return true
		}
	}
	return false
}
