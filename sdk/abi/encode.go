package abi

import (
	"encoding/base64"
	"slices"
	"strconv"
)

// encoder appends members of one JSON object, omitting empty ones.
type encoder struct {
	b     []byte
	first bool
}

func newEncoder(b []byte) encoder { return encoder{b: append(b, '{'), first: true} }

func (e *encoder) close() []byte { return append(e.b, '}') }

func (e *encoder) key(k string) {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, k...) // keys are constants without escapes
	e.b = append(e.b, '"', ':')
}

func (e *encoder) str(k, v string) {
	if v != "" {
		e.key(k)
		e.b = appendString(e.b, v)
	}
}

func (e *encoder) int(k string, v int64) {
	if v != 0 {
		e.key(k)
		e.b = strconv.AppendInt(e.b, v, 10)
	}
}

func (e *encoder) boolean(k string, v bool) {
	if v {
		e.key(k)
		e.b = append(e.b, "true"...)
	}
}

// boolAlways writes v even when false, for members whose absence would be
// ambiguous (allowed, found, done).
func (e *encoder) boolAlways(k string, v bool) {
	e.key(k)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *encoder) raw(k string, v RawJSON) {
	if len(v) != 0 {
		e.key(k)
		e.b = append(e.b, v...)
	}
}

func (e *encoder) strMap(k string, m map[string]string) {
	if len(m) != 0 {
		e.key(k)
		e.b = appendStrMap(e.b, m)
	}
}

func (e *encoder) strList(k string, l []string) {
	if len(l) == 0 {
		return
	}
	e.key(k)
	e.b = append(e.b, '[')
	for i, s := range l {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendString(e.b, s)
	}
	e.b = append(e.b, ']')
}

// bytes writes v as a base64 string (standard encoding, padded).
func (e *encoder) bytes(k string, v []byte) {
	if len(v) != 0 {
		e.key(k)
		e.b = append(e.b, '"')
		e.b = base64.StdEncoding.AppendEncode(e.b, v)
		e.b = append(e.b, '"')
	}
}

func (e *encoder) rawList(k string, l []RawJSON) {
	if len(l) != 0 {
		e.key(k)
		e.b = appendRawList(e.b, l)
	}
}

func (e *encoder) rawListMap(k string, m map[string][]RawJSON) {
	if len(m) == 0 {
		return
	}
	e.key(k)
	e.b = append(e.b, '{')
	for i, key := range sortedKeys(m) {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendString(e.b, key)
		e.b = append(e.b, ':')
		e.b = appendRawList(e.b, m[key])
	}
	e.b = append(e.b, '}')
}

func appendRawList(b []byte, l []RawJSON) []byte {
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		if len(v) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, v...)
		}
	}
	return append(b, ']')
}

func appendStrMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// sortedKeys makes encodings deterministic; maps here are small.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
