package abi

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// ErrSyntax is the error every decoder of this package wraps for malformed
// JSON.
var ErrSyntax = errors.New("abi: invalid JSON")

// maxDepth bounds nesting so a hostile document cannot exhaust the stack.
const maxDepth = 512

// RawJSON is one JSON value kept as its encoded bytes, like
// encoding/json.RawMessage. A nil or empty RawJSON encodes as null.
type RawJSON []byte

// MarshalJSON returns r, or null when r is empty.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// UnmarshalJSON stores a copy of b; null leaves r empty.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// Valid reports whether r holds exactly one well-formed JSON value.
func (r RawJSON) Valid() bool {
	d := decoder{b: r}
	d.skip(0)
	d.ws()
	return d.err == nil && d.i == len(d.b)
}

// Get returns the value at the path of object keys, and whether it exists.
// It scans r without decoding it, so a lookup costs one pass over the bytes
// before the value.
func (r RawJSON) Get(path ...string) (RawJSON, bool) {
	d := decoder{b: r, alias: true}
	for _, key := range path {
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != '{' {
			return nil, false
		}
		found := false
		d.object(func(d *decoder, k []byte) bool {
			if string(k) == key {
				found = true
				return false
			}
			d.skip(0)
			return true
		})
		if !found || d.err != nil {
			return nil, false
		}
	}
	d.ws()
	start := d.i
	d.skip(0)
	if d.err != nil {
		return nil, false
	}
	return r[start:d.i], true
}

// String returns the string at path, or "" when it is absent or not a string.
func (r RawJSON) String(path ...string) string {
	v, ok := r.Get(path...)
	if !ok || len(v) == 0 || v[0] != '"' {
		return ""
	}
	d := decoder{b: v}
	return d.str()
}

// Int returns the integer at path, or 0 when it is absent or not an integer.
func (r RawJSON) Int(path ...string) int64 {
	v, ok := r.Get(path...)
	if !ok {
		return 0
	}
	d := decoder{b: v}
	n := d.int()
	if d.err != nil {
		return 0
	}
	return n
}

// Bool returns the boolean at path, or false when it is absent or not a
// boolean.
func (r RawJSON) Bool(path ...string) bool {
	v, ok := r.Get(path...)
	return ok && string(v) == "true"
}

// Has reports whether path exists and is not null.
func (r RawJSON) Has(path ...string) bool {
	v, ok := r.Get(path...)
	return ok && string(v) != "null"
}

// Object is a JSON object writer that appends to a caller-owned buffer, for
// building statuses, children and patches without reflection. The zero
// value is ready to use; Bytes closes the object.
type Object struct {
	b     []byte
	first bool
	open  bool
}

// NewObject starts an object that appends to buf[:0], so a caller can reuse
// one buffer across calls.
func NewObject(buf []byte) *Object {
	o := &Object{}
	o.Reset(buf)
	return o
}

// Reset starts a new object in buf[:0].
func (o *Object) Reset(buf []byte) {
	o.b = append(buf[:0], '{')
	o.first, o.open = true, true
}

func (o *Object) key(k string) {
	if !o.open {
		o.Reset(o.b)
	}
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = appendString(o.b, k)
	o.b = append(o.b, ':')
}

// Str adds a string member.
func (o *Object) Str(k, v string) *Object { o.key(k); o.b = appendString(o.b, v); return o }

// Int adds an integer member.
func (o *Object) Int(k string, v int64) *Object {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
	return o
}

// Bool adds a boolean member.
func (o *Object) Bool(k string, v bool) *Object { o.key(k); o.b = strconv.AppendBool(o.b, v); return o }

// Raw adds a member whose value is already encoded; an empty v writes null.
func (o *Object) Raw(k string, v RawJSON) *Object {
	o.key(k)
	if len(v) == 0 {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, v...)
	}
	return o
}

// Object adds a nested object member built by fn.
func (o *Object) Object(k string, fn func(*Object)) *Object {
	o.key(k)
	inner := Object{b: append(o.b, '{'), first: true, open: true}
	fn(&inner)
	o.b = append(inner.b, '}')
	return o
}

// StrMap adds an object member holding the string map, keys in order.
func (o *Object) StrMap(k string, m map[string]string) *Object {
	o.key(k)
	o.b = appendStrMap(o.b, m)
	return o
}

// Bytes closes the object and returns its encoding, which aliases the
// buffer given to NewObject or Reset.
func (o *Object) Bytes() RawJSON {
	if !o.open {
		if len(o.b) == 0 {
			o.Reset(o.b)
		} else {
			return o.b
		}
	}
	o.b = append(o.b, '}')
	o.open = false
	return o.b
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// the output is always valid.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
