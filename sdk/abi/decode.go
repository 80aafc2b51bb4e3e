package abi

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// syntaxError says what is malformed and where; it wraps ErrSyntax.
type syntaxError struct {
	what   string
	offset int
}

func (e *syntaxError) Error() string {
	return ErrSyntax.Error() + ": " + e.what + " at offset " + strconv.Itoa(e.offset)
}

func (e *syntaxError) Unwrap() error { return ErrSyntax }

// decoder reads one JSON document without reflection. The first error
// sticks; every reader is a no-op afterwards.
type decoder struct {
	b   []byte
	i   int
	err error
	// alias makes raw values slices of b instead of copies, without
	// checking them (b comes from the host).
	alias bool
	// owned makes raw values slices of b too, after checking them (b is a
	// copy the caller handed over).
	owned bool
	// scratch holds an unescaped key.
	scratch []byte
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = &syntaxError{what: what, offset: d.i}
	}
	d.i = len(d.b)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// document checks that the input starts with an object, as every document
// must (open would also take null), and fails otherwise.
func (d *decoder) document() bool {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		d.fail("expected an object")
		return false
	}
	return true
}

// end checks that only whitespace follows the document.
func (d *decoder) end() error {
	d.ws()
	if d.err == nil && d.i != len(d.b) {
		d.fail("data after the document")
	}
	return d.err
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	d.ws()
	if d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

func (d *decoder) expect(c byte) {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		d.fail("expected " + strconv.QuoteRune(rune(c)))
		return
	}
	d.i++
}

// open starts reading a compound value that begins with c ('{' or '['):
// it consumes the opening byte and reports true, or consumes null (or
// fails) and reports false. When it reports true, the members or elements
// are read with member or element, in a plain loop:
//
//	for first, open := true, d.open('{'); open; first = false {
//		key, ok := d.member(first)
//		if !ok {
//			break
//		}
//		... consume the value ...
//	}
//
// Loops instead of callbacks keep the decoder on its caller's stack (a
// callback would move it to the heap) and spare a function-value call per
// member, which matters inside a Wasm guest.
func (d *decoder) open(c byte) bool {
	if d.null() || d.err != nil {
		return false
	}
	d.expect(c)
	return d.err == nil
}

// member moves to the next member of the object being read and returns its
// key, leaving the decoder on the value; it reports false after the closing
// brace and on error. The key aliases the input or d.scratch, as rawStr's
// result does. first is true for the first member only. Call it only after
// open reported true: on null there is nothing to read.
func (d *decoder) member(first bool) ([]byte, bool) {
	if d.err != nil {
		return nil, false
	}
	d.ws()
	if d.i >= len(d.b) {
		d.fail("unterminated object")
		return nil, false
	}
	if first {
		if d.b[d.i] == '}' {
			d.i++
			return nil, false
		}
	} else {
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil, false
		default:
			d.fail("expected ',' or '}'")
			return nil, false
		}
	}
	key := d.rawStr()
	d.expect(':')
	if d.err != nil {
		return nil, false
	}
	d.ws()
	return key, true
}

// element moves to the next element of the array being read, like member.
func (d *decoder) element(first bool) bool {
	if d.err != nil {
		return false
	}
	d.ws()
	if d.i >= len(d.b) {
		d.fail("unterminated array")
		return false
	}
	if first {
		if d.b[d.i] == ']' {
			d.i++
			return false
		}
	} else {
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return false
		default:
			d.fail("expected ',' or ']'")
			return false
		}
	}
	d.ws()
	return true
}

// array reads an array (or null), calling fn to consume each element.
func (d *decoder) array(fn func(d *decoder)) {
	for first, open := true, d.open('['); open && d.element(first); first = false {
		fn(d)
	}
}

// rawStr reads a string and returns its unescaped bytes, which alias either
// the input (no escapes) or d.scratch (valid until the next rawStr).
func (d *decoder) rawStr() []byte {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		d.fail("expected a string")
		return nil
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s
		case c == '\\':
			return d.unescape(start)
		case c < 0x20:
			d.fail("control character in string")
			return nil
		}
		d.i++
	}
	d.fail("unterminated string")
	return nil
}

// unescape finishes a string with escapes that began at start.
func (d *decoder) unescape(start int) []byte {
	out := append(d.scratch[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.scratch = out
			return out
		case c < 0x20:
			d.fail("control character in string")
			return nil
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			break
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := d.hex4()
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					r2 = d.hex4()
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						d.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			d.fail("invalid escape")
			return nil
		}
	}
	d.fail("unterminated string")
	return nil
}

func (d *decoder) hex4() rune {
	if d.i+4 > len(d.b) {
		d.fail("short \\u escape")
		return 0
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			d.fail("invalid \\u escape")
			return 0
		}
	}
	d.i += 4
	return r
}

// str reads a string or null.
func (d *decoder) str() string {
	if d.null() {
		return ""
	}
	return string(d.rawStr())
}

// bytes reads a base64 string (standard encoding, padded) or null.
func (d *decoder) bytes() []byte {
	if d.null() {
		return nil
	}
	at := d.i
	s := d.rawStr()
	if d.err != nil {
		return nil
	}
	b, err := base64.StdEncoding.AppendDecode(nil, s)
	if err != nil {
		d.i = at
		d.fail("expected a base64 string")
		return nil
	}
	return b
}

// int reads an integer or null.
func (d *decoder) int() int64 {
	if d.null() {
		return 0
	}
	d.ws()
	start := d.i
	d.number()
	if d.err != nil {
		return 0
	}
	n, ok := parseInt(d.b[start:d.i])
	if !ok {
		d.i = start
		d.fail("expected an integer")
		return 0
	}
	return n
}

// parseInt parses a JSON number that must be an integer in int64's range.
// Up to 18 digits it adds them up in one loop (a guest pays for every call,
// and strconv is several); longer ones go to strconv.
func parseInt(b []byte) (int64, bool) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(b) {
		n = -n
	}
	return n, true
}

// boolean reads true, false or null.
func (d *decoder) boolean() bool {
	if d.null() {
		return false
	}
	switch {
	case d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true
	case d.i+5 <= len(d.b) && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		return false
	}
	d.fail("expected a boolean")
	return false
}

// raw reads any value; null gives nil.
func (d *decoder) raw() RawJSON {
	if d.null() {
		return nil
	}
	d.ws()
	start := d.i
	if d.alias {
		// Aliased decoding reads what the host wrote: skip without
		// validating, in one tight loop.
		end := skipValue(d.b, start)
		if end < 0 {
			d.fail("invalid value")
			return nil
		}
		d.i = end
		return RawJSON(d.b[start:end:end])
	}
	d.skip(0)
	if d.err != nil {
		return nil
	}
	if d.owned {
		return RawJSON(d.b[start:d.i:d.i])
	}
	return RawJSON(slices.Clone(d.b[start:d.i]))
}

// lastRaw reads the value of the last member of the document. In alias
// mode it trusts the writer (AppendJSON puts the object last) and takes
// everything up to the document's closing brace without scanning it, which
// spares a guest one pass over the largest value; otherwise it is raw.
func (d *decoder) lastRaw() RawJSON {
	if !d.alias {
		return d.raw()
	}
	d.ws()
	end := len(d.b)
	for end > d.i && isSpace(d.b[end-1]) {
		end--
	}
	if end-d.i < 3 || d.b[end-1] != '}' || d.b[d.i] != '{' {
		return d.raw()
	}
	close := end - 1 // the document's closing brace
	v := close
	for v > d.i && isSpace(d.b[v-1]) {
		v--
	}
	if d.b[v-1] != '}' {
		return d.raw()
	}
	start := d.i
	d.i = close
	return RawJSON(d.b[start:v:v])
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// strMap reads an object of strings.
func (d *decoder) strMap() map[string]string { return d.strMapInto(nil) }

// strMapInto reads an object of strings. m, when not nil, is cleared and
// filled instead of a new map (aliased decoding reuses its maps).
func (d *decoder) strMapInto(m map[string]string) map[string]string {
	clear(m)
	for first, open := true, d.open('{'); open; first = false {
		k, ok := d.member(first)
		if !ok {
			break
		}
		if m == nil {
			m = make(map[string]string)
		}
		key := d.aliasStr(k)
		if d.null() {
			m[key] = ""
		} else {
			m[key] = d.aliasStr(d.rawStr())
		}
	}
	return m
}

// aliasStr converts b to a string, without copying in alias mode when b
// lies in the input (no escapes).
func (d *decoder) aliasStr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if d.alias && len(d.scratch) > 0 && &b[0] == &d.scratch[0] {
		return string(b)
	}
	if d.alias {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

func (d *decoder) strList() []string {
	var l []string
	d.array(func(d *decoder) { l = append(l, d.str()) })
	return l
}

func (d *decoder) rawList() []RawJSON { return d.rawListInto(nil) }

// rawListInto appends the elements of an array to l; an empty array gives
// nil.
func (d *decoder) rawListInto(l []RawJSON) []RawJSON {
	for first, open := true, d.open('['); open && d.element(first); first = false {
		l = append(l, d.raw())
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// rawListMap reads an object of arrays. m, when not nil, is cleared and
// filled instead of a new map, and the largest list it held lends its
// backing array to the new lists, one after the other, each capped at its
// length so that appending to one cannot overwrite the next. In alias mode
// the keys alias the input.
func (d *decoder) rawListMap(m map[string][]RawJSON) map[string][]RawJSON {
	var spare []RawJSON
	for _, l := range m {
		if cap(l) > cap(spare) {
			spare = l[:0]
		}
	}
	clear(m)
	for first, open := true, d.open('{'); open; first = false {
		k, ok := d.member(first)
		if !ok {
			break
		}
		if m == nil {
			m = make(map[string][]RawJSON)
		}
		key := d.aliasStr(k)
		l := d.rawListInto(spare)
		if n := len(l); n > 0 && n <= cap(spare) && &l[0] == &spare[:1][0] {
			spare = spare[n:n] // l took the front of spare
		} else {
			spare = nil
		}
		m[key] = l[:len(l):len(l)]
	}
	return m
}

// skip consumes and validates one value.
func (d *decoder) skip(depth int) {
	d.ws()
	if d.i >= len(d.b) {
		d.fail("unexpected end of input")
		return
	}
	if depth > maxDepth {
		d.fail("nesting too deep")
		return
	}
	switch c := d.b[d.i]; {
	case c == '{':
		for first, open := true, d.open('{'); open; first = false {
			if _, ok := d.member(first); !ok {
				break
			}
			d.skip(depth + 1)
		}
	case c == '[':
		for first, open := true, d.open('['); open && d.element(first); first = false {
			d.skip(depth + 1)
		}
	case c == '"':
		d.skipStr()
	case c == '-' || (c >= '0' && c <= '9'):
		d.number()
	case c == 't' || c == 'f':
		d.boolean()
	case c == 'n':
		if !d.null() {
			d.fail("invalid literal")
		}
	default:
		d.fail("unexpected character")
	}
}

// skipStr validates a string without unescaping it.
func (d *decoder) skipStr() {
	d.i++
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return
		case c < 0x20:
			d.fail("control character in string")
			return
		case c == '\\':
			if d.i+1 >= len(d.b) {
				d.fail("unterminated string")
				return
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				d.i += 2
				d.hex4()
			default:
				d.fail("invalid escape")
				return
			}
			continue
		}
		d.i++
	}
	d.fail("unterminated string")
}

// number validates a JSON number.
func (d *decoder) number() {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		d.fail("invalid number")
		return
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			d.fail("invalid number")
			return
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			d.fail("invalid number")
		}
	}
}
