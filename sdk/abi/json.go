package abi

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
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
// It scans r without decoding it: one pass over the bytes before the value,
// with no allocation. r must be valid JSON (check untrusted input with
// Valid first); on malformed input Get returns false or a meaningless
// slice, never panics.
func (r RawJSON) Get(path ...string) (RawJSON, bool) {
	b := []byte(r)
	i := skipWS(b, 0)
	for _, key := range path {
		if i >= len(b) || b[i] != '{' {
			return nil, false
		}
		i++
		for {
			i = skipWS(b, i)
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			ks := i + 1
			j, escaped := keyEnd(b, ks)
			if j >= len(b) {
				return nil, false
			}
			k := b[ks:j]
			i = skipWS(b, j+1)
			if i >= len(b) || b[i] != ':' {
				return nil, false
			}
			i = skipWS(b, i+1)
			if (!escaped && string(k) == key) || (escaped && unescapedEquals(k, key)) {
				break
			}
			if i = skipValue(b, i); i < 0 {
				return nil, false
			}
			i = skipWS(b, i)
			if i >= len(b) || b[i] != ',' {
				return nil, false
			}
			i++
		}
	}
	end := skipValue(b, i)
	if end < 0 {
		return nil, false
	}
	return r[i:end:end], true
}

func unescapedEquals(k []byte, key string) bool {
	d := decoder{b: append(append([]byte{'"'}, k...), '"')}
	return string(d.rawStr()) == key && d.err == nil
}

// Word-at-a-time scanning. Strings are most of a JSON document's bytes,
// and inside a Wasm guest every loop iteration costs several times its
// native price, so the scanners test eight bytes per iteration for the few
// bytes that end a plain run (a quote, a backslash, and for the encoder
// control and non-ASCII bytes). A word is read little-endian
// (binary.LittleEndian, one load on every target that allows unaligned
// loads, wasm included), so its lowest flagged bit is its first such byte.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// zeroBytes flags (high bit set) the zero bytes of x; the lowest flag is
// exact, higher ones may be false (a borrow), which is enough to find the
// first one or to tell that there is none.
func zeroBytes(x uint64) uint64 { return (x - lsb) &^ x & msb }

// quoteOrEscape returns the index of the first '"' or '\\' in b at or after
// i, or len(b) (or i, when i is past the end) when there is none.
func quoteOrEscape(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i : i+8])
		if m := zeroBytes(x^('"'*lsb)) | zeroBytes(x^('\\'*lsb)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' {
		i++
	}
	return i
}

// stringEnd returns the index of the quote that closes the string whose
// body starts at b[i] (len(b) or more when it is unterminated) and whether
// the body holds an escape.
func stringEnd(b []byte, i int) (end int, escaped bool) {
	i = quoteOrEscape(b, i)
	for i < len(b) && b[i] == '\\' {
		escaped = true
		i = quoteOrEscape(b, i+2)
	}
	return i, escaped
}

// keyEnd is stringEnd for keys, which are short: a plain loop, small
// enough to be inlined, costs less there than the word-at-a-time scan.
func keyEnd(b []byte, i int) (end int, escaped bool) {
	for i < len(b) && b[i] != '"' {
		if b[i] == '\\' {
			escaped = true
			i++
		}
		i++
	}
	return i, escaped
}

// plainWord reports whether the eight bytes of s at i need no escaping in
// a JSON string: no control byte, quote, backslash or non-ASCII byte.
func plainWord(s string, i int) bool {
	_ = s[i+7]
	x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
	return (x&msb | (x-0x20*lsb)&^x&msb | zeroBytes(x^('"'*lsb)) | zeroBytes(x^('\\'*lsb))) == 0
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the value starting at b[i], assuming valid
// JSON, or -1. It tracks only nesting and strings: one tight loop, no
// calls, which matters inside a guest where each call and loop costs.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i, _ = stringEnd(b, i+1)
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	case '"':
		i, _ = stringEnd(b, i+1)
		if i >= len(b) {
			return -1
		}
		return i + 1
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\n', '\t', '\r':
			if i == start {
				return -1
			}
			return i
		}
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// View returns the string at path like String, but without copying when
// the string has no escapes: the result aliases r and is valid only as
// long as r's bytes are (in a handler, until it returns). Use it for
// values a handler reads and writes into its response right away.
func (r RawJSON) View(path ...string) string {
	v, ok := r.Get(path...)
	if !ok || len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' {
			d := decoder{b: v}
			return d.str()
		}
	}
	if len(inner) == 0 {
		return ""
	}
	return unsafe.String(&inner[0], len(inner))
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

// Fields looks up several members of the object r in one pass: vals[i]
// becomes the value of the member keys[i], or nil when r has no such member
// (or is not an object). It stops scanning once every key is found. Reading
// the top-level members an object's logic needs (metadata, spec, status)
// with one Fields call, then fields inside them with Get, View or Int,
// scans each byte of r at most once, where a Get from the root per field
// rescans the members before it every time. r must be valid JSON, as for
// Get. vals must be at least as long as keys.
func (r RawJSON) Fields(keys []string, vals []RawJSON) {
	vals = vals[:len(keys)]
	clear(vals)
	b := []byte(r)
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	left := len(keys)
	for left > 0 {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		ks := i + 1
		j, escaped := keyEnd(b, ks)
		if j >= len(b) {
			return
		}
		k := b[ks:j]
		i = skipWS(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		end := skipValue(b, i)
		if end < 0 {
			return
		}
		for n, key := range keys {
			if vals[n] == nil && ((!escaped && string(k) == key) || (escaped && unescapedEquals(k, key))) {
				vals[n] = r[i:end:end]
				left--
				break
			}
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// Object is a JSON object writer that appends to a caller-owned buffer, for
// building statuses, children and patches without reflection. The zero
// value is ready to use; Bytes closes the object. Nested objects are
// written either with Object, which takes a function, or between Begin and
// End, which allocate nothing even when the writer lives on the stack.
type Object struct {
	b     []byte
	first bool
	open  bool
	depth int // nested objects opened by Begin and not yet ended
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
	o.first, o.open, o.depth = true, true, 0
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

// Time adds t as an RFC 3339 string in UTC, as Kubernetes writes
// timestamps, without the string that t.Format would allocate.
func (o *Object) Time(k string, t time.Time) *Object {
	o.key(k)
	o.b = append(t.UTC().AppendFormat(append(o.b, '"'), time.RFC3339), '"')
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

// Object adds a nested object member built by fn, which writes the
// members through the writer it is given.
func (o *Object) Object(k string, fn func(*Object)) *Object {
	o.Begin(k)
	depth := o.depth
	fn(o)
	for o.depth >= depth {
		o.End()
	}
	return o
}

// Begin opens a nested object member k: the members written next belong to
// it until the matching End.
func (o *Object) Begin(k string) *Object {
	o.key(k)
	o.b = append(o.b, '{')
	o.first = true
	o.depth++
	return o
}

// End closes the nested object opened by the last Begin; without one it
// does nothing.
func (o *Object) End() *Object {
	if o.depth == 0 || !o.open {
		return o
	}
	o.b = append(o.b, '}')
	o.first = false // the outer object now holds the nested one
	o.depth--
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
	for ; o.depth > 0; o.depth-- {
		o.b = append(o.b, '}')
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
		if i+8 <= len(s) && plainWord(s, i) {
			i += 8
			continue
		}
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
