package objjson

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// checkDecode fails when Decode accepts doc and gives other than
// utiljson.Unmarshal, or accepts what utiljson refuses. It reports whether
// Decode accepted doc.
func checkDecode(t *testing.T, doc []byte) bool {
	t.Helper()
	got, ok := Decode(doc)
	var want map[string]any
	err := utiljson.Unmarshal(doc, &want)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("Decode accepted %q, which utiljson refuses: %v", doc, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Decode(%q) (-utiljson +Decode):\n%s", doc, diff)
	}
	return true
}

// TestDecodeIsUtiljson: Decode gives what utiljson.Unmarshal gives, and
// refuses, for the caller to ask utiljson, what it refuses.
func TestDecodeIsUtiljson(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"widget", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"size":"small","n":3}}`, true},
		{"whitespace", " \t\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] }\r\n", true},
		{"numbers", `{"a":0,"b":-0,"c":-12,"d":1.5,"e":1e2,"f":1E-2,"g":-0.0,"h":9223372036854775807,"i":9223372036854775808,"j":-9223372036854775809,"k":1.0,"l":1e+2}`, true},
		{"literals", `{"t":true,"f":false,"n":null}`, true},
		{"nested", `{"a":[[],{},[{"b":[null]}]],"c":{"d":{"e":{}}}}`, true},
		{"escapes and non-ASCII", `{"a\"b":"c\\d\n\u00e9\ud83d\ude00","é":"ü","bad":"\ud800","s":"\/"}`, true},
		{"invalid UTF-8", "{\"a\":\"\xff\xfe\"}", true},
		{"duplicate keys", `{"a":1,"a":"two"}`, true},
		{"empty key", `{"":1}`, true},
		{"not an object", `[1]`, false},
		{"a string", `"a"`, false},
		{"null", `null`, false},
		{"empty", ``, false},
		{"trailing data", `{}x`, false},
		{"two objects", `{} {}`, false},
		{"leading zero", `{"a":01}`, false},
		{"bare minus", `{"a":-}`, false},
		{"plus sign", `{"a":+1}`, false},
		{"dot without digits", `{"a":1.}`, false},
		{"leading dot", `{"a":.5}`, false},
		{"exponent without digits", `{"a":1e}`, false},
		{"out of range", `{"a":1e400}`, false},
		{"control character", "{\"a\":\"\x01\"}", false},
		{"trailing comma", `{"a":1,}`, false},
		{"array trailing comma", `{"a":[1,]}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"unterminated", `{"a":"b`, false},
		{"unterminated object", `{"a":1`, false},
		{"bad literal", `{"a":tru}`, false},
		{"bad escape", `{"a":"\x"}`, false},
		{"short unicode escape", `{"a":"\u12"}`, false},
		{"unquoted key", `{a:1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkDecode(t, []byte(tc.doc)); got != tc.ok {
				t.Errorf("Decode accepted %q: %v, want %v", tc.doc, got, tc.ok)
			}
		})
	}
}

// TestDecodeRandom compares Decode with utiljson.Unmarshal on random
// documents, written with random spacing and number spellings, and on
// copies of them with one byte changed, most of which are invalid.
func TestDecodeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	accepted, refused := 0, 0
	for i := range 4000 {
		var b bytes.Buffer
		b.WriteString(space(r))
		writeRandomObject(r, &b, 0)
		b.WriteString(space(r))
		doc := b.Bytes()
		if !checkDecode(t, doc) {
			t.Fatalf("case %d: Decode refused the valid document %q", i, doc)
		}
		accepted++
		bad := mutateBytes(r, doc)
		if !checkDecode(t, bad) {
			refused++
		}
	}
	if refused < accepted/4 {
		t.Errorf("only %d of %d changed documents refused; the changes are too mild to test refusals", refused, accepted)
	}
}

// FuzzDecode checks Decode against utiljson.Unmarshal.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`,
		`{"a":[1,-0.5e3,"\u00e9",true,null,{}],"b":9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkDecode(t, doc) })
}

// TestScannerReadsWhatDecodeReads walks random documents member by member
// with a Scanner: the keys are the document's, each value's raw bytes
// decode as utiljson decodes that member, and nothing is left over.
func TestScannerReadsWhatDecodeReads(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 2000 {
		var b bytes.Buffer
		writeRandomObject(r, &b, 0)
		doc := b.Bytes()
		var want map[string]any
		if err := utiljson.Unmarshal(doc, &want); err != nil {
			t.Fatalf("case %d: %q: %v", i, doc, err)
		}
		got := map[string]any{}
		s := NewScanner(doc)
		ok := s.Object(func(key string) bool {
			raw, ok := s.Raw()
			var v any
			if err := utiljson.Unmarshal(raw, &v); err != nil {
				t.Fatalf("case %d: the raw value of %q, %q, does not decode: %v", i, key, raw, err)
			}
			got[key] = v
			return ok
		})
		if !ok || !s.Done() {
			t.Fatalf("case %d: the Scanner did not walk %q to its end", i, doc)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: %q (-utiljson +Scanner):\n%s", i, doc, diff)
		}
	}
}

// writeRandomObject writes a random JSON object to b: keys that repeat now
// and then, strings with escapes, non-ASCII and invalid UTF-8, numbers
// spelled in every way JSON allows within float64's range.
func writeRandomObject(r *rand.Rand, b *bytes.Buffer, depth int) {
	b.WriteByte('{')
	for i := range r.IntN(5) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(space(r))
		writeRandomString(r, b)
		b.WriteString(space(r) + ":" + space(r))
		writeRandomValue(r, b, depth+1)
		b.WriteString(space(r))
	}
	b.WriteByte('}')
}

func writeRandomValue(r *rand.Rand, b *bytes.Buffer, depth int) {
	n := 8
	if depth > 3 {
		n = 6
	}
	switch r.IntN(n) {
	case 0, 1:
		writeRandomString(r, b)
	case 2, 3:
		b.WriteString(randomNumber(r))
	case 4:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 5:
		b.WriteString([]string{"{}", "[]", "[ ]", "{ }"}[r.IntN(4)])
	case 6:
		writeRandomObject(r, b, depth)
	default:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(space(r) + "," + space(r))
			}
			writeRandomValue(r, b, depth+1)
		}
		b.WriteByte(']')
	}
}

func writeRandomString(r *rand.Rand, b *bytes.Buffer) {
	parts := []string{"a", "k", "name", "é", "\\n", "\\\"", "\\\\", "\\/", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "<&>", "\xff", "\u2028", " ", "\\t"}
	b.WriteByte('"')
	for range r.IntN(4) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	b.WriteByte('"')
}

func randomNumber(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return fmt.Sprint(r.Int64N(1000) - 500)
	case 1:
		return fmt.Sprint(r.Int64())
	case 2:
		return "-" + fmt.Sprint(r.Uint64()) // beyond int64 now and then
	case 3:
		return fmt.Sprint(r.Uint64())
	case 4:
		return fmt.Sprintf("%d.%d", r.IntN(100)-50, r.IntN(1000))
	case 5:
		return fmt.Sprintf("%d%s%s%d", r.IntN(10), []string{"e", "E"}[r.IntN(2)], []string{"", "+", "-"}[r.IntN(3)], r.IntN(300))
	case 6:
		return []string{"0", "-0", "0.0", "-0.0", "1.0", "1e0", "9007199254740993", "1.7976931348623157e308", "5e-324"}[r.IntN(9)]
	default:
		return fmt.Sprint(r.NormFloat64() * 1e6)
	}
}

func space(r *rand.Rand) string {
	if r.IntN(4) > 0 {
		return ""
	}
	return []string{" ", "\n", "\t", "\r\n  "}[r.IntN(4)]
}

// mutateBytes returns a copy of doc with one byte deleted, inserted or
// replaced, drawn from the bytes that matter to JSON.
func mutateBytes(r *rand.Rand, doc []byte) []byte {
	out := bytes.Clone(doc)
	i := r.IntN(len(out))
	c := `{}[]",:\0-+.eE tfn` + "\x01\xff"
	ch := c[r.IntN(len(c))]
	switch r.IntN(3) {
	case 0:
		return append(out[:i], out[i+1:]...)
	case 1:
		return append(out[:i], append([]byte{ch}, out[i:]...)...)
	}
	out[i] = ch
	return out
}
