package objjson

import (
	"strconv"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Decode decodes a JSON object as utiljson.Unmarshal does into a
// map[string]any (integers that fit in int64 as int64, other numbers as
// float64, the last of duplicate keys kept), without reflection. Strings
// with escapes or non-ASCII bytes are decoded by utiljson itself. It
// reports false for anything that is not a valid JSON object or that it
// does not handle (a number out of range); the caller then decodes with
// utiljson, which gives the error.
func Decode(b []byte) (map[string]any, bool) {
	d := jsonDecoder{b: b}
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return nil, false
	}
	v, ok := d.value()
	if !ok {
		return nil, false
	}
	d.space()
	if d.i != len(d.b) {
		return nil, false
	}
	m, _ := v.(map[string]any)
	return m, true
}

type jsonDecoder struct {
	b []byte
	i int
}

func (d *jsonDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value() (any, bool) {
	d.space()
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *jsonDecoder) literal(lit string) bool {
	if !strings.HasPrefix(string(d.b[d.i:min(len(d.b), d.i+len(lit))]), lit) {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *jsonDecoder) object() (any, bool) {
	m := map[string]any{}
	ok := d.objectMembers(func(k string) bool {
		v, ok := d.value()
		if ok {
			m[k] = v
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return m, true
}

// objectMembers reads the object whose '{' is at d.i, calling member with
// each key once d.i is at its value; member reads the value.
func (d *jsonDecoder) objectMembers(member func(key string) bool) bool {
	return d.members('}', func() bool {
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return false
		}
		k, ok := d.str()
		if !ok {
			return false
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		return member(k)
	})
}

func (d *jsonDecoder) array() (any, bool) {
	a := []any{}
	ok := d.members(']', func() bool {
		v, ok := d.value()
		if !ok {
			return false
		}
		a = append(a, v)
		return true
	})
	if !ok {
		return nil, false
	}
	return a, true
}

// members reads the members of the object or array whose opening byte is
// at d.i, up to and including end, decoding each with member (which
// reports false at a syntax error).
func (d *jsonDecoder) members(end byte, member func() bool) bool {
	d.i++ // { or [
	d.space()
	if d.i < len(d.b) && d.b[d.i] == end {
		d.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		d.space()
		if d.i >= len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case end:
			d.i++
			return true
		default:
			return false
		}
	}
}

// str decodes the string at d.i (its opening quote).
func (d *jsonDecoder) str() (string, bool) {
	start := d.i
	d.i++
	plain := true
	for d.i < len(d.b) {
		d.i += Plain(d.b[d.i:])
		if d.i >= len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if plain {
				return string(d.b[start+1 : d.i-1]), true
			}
			var s string
			if utiljson.Unmarshal(d.b[start:d.i], &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			d.i += 2 // the escaped byte cannot end the string
		case c < 0x20:
			return "", false
		default:
			if c >= 0x80 {
				plain = false
			}
			d.i++
		}
	}
	return "", false
}

// number decodes the number at d.i as utiljson does: without a '.', as an
// int64 when it fits, otherwise as a float64.
func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	s := string(d.b[start:d.i])
	if !strings.Contains(s, ".") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// digits skips one or more digits and reports whether there was one.
func (d *jsonDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// skip steps over the value at d.i without decoding it. Containers are
// stepped over by matching brackets outside strings, numbers and literals
// up to the next delimiter: it is for documents known to be valid JSON (the
// store's), where a wrong guess cannot arise.
func (d *jsonDecoder) skip() bool {
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

func (d *jsonDecoder) skipStr() bool {
	for d.i++; d.i < len(d.b); d.i++ {
		if d.i += Plain(d.b[d.i:]); d.i >= len(d.b) {
			break
		}
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

// Scanner walks a JSON document member by member, reading only the values
// its caller asks for and stepping over the rest without decoding them; the
// engine's garbage collector reads the metadata of every stored write with
// it. It shares Decode's reading of strings, objects and arrays.
type Scanner struct{ d jsonDecoder }

// NewScanner returns a Scanner at the start of b.
func NewScanner(b []byte) *Scanner { return &Scanner{d: jsonDecoder{b: b}} }

// Object walks the object at the scanner, calling member with each key once
// the scanner is at its value; member must read or skip the value.
func (s *Scanner) Object(member func(key string) bool) bool {
	s.d.space()
	if s.d.i >= len(s.d.b) || s.d.b[s.d.i] != '{' {
		return false
	}
	return s.d.objectMembers(member)
}

// Array walks the array at the scanner (null is an empty one), calling elem
// for each element, which must read or skip it.
func (s *Scanner) Array(elem func() bool) bool {
	s.d.space()
	if s.d.i < len(s.d.b) && s.d.b[s.d.i] == 'n' {
		return s.d.literal("null")
	}
	if s.d.i >= len(s.d.b) || s.d.b[s.d.i] != '[' {
		return false
	}
	return s.d.members(']', elem)
}

// String reads a string.
func (s *Scanner) String() (string, bool) {
	s.d.space()
	if s.d.i >= len(s.d.b) || s.d.b[s.d.i] != '"' {
		return "", false
	}
	return s.d.str()
}

// Bool reads true, false or null.
func (s *Scanner) Bool() (v, null, ok bool) {
	s.d.space()
	if s.d.i >= len(s.d.b) {
		return false, false, false
	}
	switch s.d.b[s.d.i] {
	case 't':
		return true, false, s.d.literal("true")
	case 'f':
		return false, false, s.d.literal("false")
	case 'n':
		return false, true, s.d.literal("null")
	}
	return false, false, false
}

// Skip steps over the value at the scanner, as it is in the document.
func (s *Scanner) Skip() bool { return s.d.skip() }

// Raw steps over the value at the scanner and returns its bytes.
func (s *Scanner) Raw() ([]byte, bool) {
	s.d.space()
	start := s.d.i
	ok := s.d.skip()
	return s.d.b[start:s.d.i], ok
}

// Done tells whether only white space is left.
func (s *Scanner) Done() bool {
	s.d.space()
	return s.d.i == len(s.d.b)
}
