package engine

import (
	"bytes"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	var d struct {
		Metadata gcMeta `json:"metadata"`
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Metadata.UID == "" {
		return gcMeta{}, false
	}
	return d.Metadata, true
}

// scanGCMeta reads gcMeta from a JSON object without decoding the rest; false
// when the document is not one it handles (then encoding/json decides).
func scanGCMeta(b []byte) (m gcMeta, ok bool) {
	d := gcScan{b: b}
	ok = d.object(func(k string) bool {
		if k != "metadata" {
			return !foldsTo(k, "metadata") && d.skip()
		}
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
							ok = !foldsTo(k, "apiVersion", "kind", "name", "uid", "blockOwnerDeletion") && d.skip()
						}
						return ok
					})
					m.OwnerReferences = append(m.OwnerReferences, r)
					return ok
				})
			default:
				ok = !foldsTo(k, "uid", "name", "namespace", "finalizers", "deletionTimestamp", "ownerReferences") && d.skip()
			}
			return ok
		})
	})
	d.space()
	return m, ok && d.i == len(b)
}

// foldsTo tells whether k is one of keys but for case: encoding/json would
// take it for that key, so the scan gives way to it.
func foldsTo(k string, keys ...string) bool {
	for _, x := range keys {
		if len(k) == len(x) && strings.EqualFold(k, x) {
			return true
		}
	}
	return false
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
