package objjson

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// checkDecodeBody fails when Decode accepts doc and gives
// other than utiljson.Unmarshal, or accepts what utiljson refuses.
func checkDecodeBody(t *testing.T, doc string) bool {
	t.Helper()
	got, ok := Decode([]byte(doc))
	var want map[string]any
	err := utiljson.Unmarshal([]byte(doc), &want)
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

func TestDecodeBodiesAreUtiljson(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"widget", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"size":"small","n":3}}`, true},
		{"whitespace", " \t\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] }\r\n", true},
		{"numbers", `{"a":0,"b":-0,"c":-12,"d":1.5,"e":1e2,"f":1E-2,"g":-0.0,"h":9223372036854775807,"i":9223372036854775808,"j":-9223372036854775809,"k":1.0}`, true},
		{"literals", `{"t":true,"f":false,"n":null}`, true},
		{"escapes and non-ASCII", `{"a\"b":"c\\d\n\u00e9\ud83d\ude00","é":"ü","bad":"\ud800"}`, true},
		{"duplicate keys", `{"a":1,"a":"two"}`, true},
		{"not an object", `[1]`, false},
		{"null", `null`, false},
		{"trailing data", `{}x`, false},
		{"two objects", `{} {}`, false},
		{"leading zero", `{"a":01}`, false},
		{"bare minus", `{"a":-}`, false},
		{"dot without digits", `{"a":1.}`, false},
		{"exponent without digits", `{"a":1e}`, false},
		{"out of range", `{"a":1e400}`, false},
		{"control character", "{\"a\":\"\x01\"}", false},
		{"trailing comma", `{"a":1,}`, false},
		{"array trailing comma", `{"a":[1,]}`, false},
		{"unterminated", `{"a":"b`, false},
		{"bad literal", `{"a":tru}`, false},
		{"bad escape", `{"a":"\x"}`, false},
		{"unquoted key", `{a:1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkDecodeBody(t, tc.doc); got != tc.ok {
				t.Errorf("Decode accepted %q: %v, want %v", tc.doc, got, tc.ok)
			}
		})
	}
}

// FuzzDecodeBody checks Decode against utiljson.Unmarshal.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`,
		`{"a":[1,-2.5e3,"x\\y",true,null,{"b":[]}],"c":"\u00e9"}`,
		`{"n":12345678901234567890}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkDecodeBody(t, doc)
	})
}

func benchWidget() []byte {
	return []byte(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w0000001","annotations":{"bench.setpoint.dev/pad":"` +
		strings.Repeat("x", 870) + `"}},"spec":{"name":"w0000001","size":"medium","color":"blue"}}`)
}

// BenchmarkDecodeBody compares decoding a 1 KiB Widget request body with
// Decode and with utiljson.Unmarshal.
func BenchmarkDecodeBody(b *testing.B) {
	doc := benchWidget()
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, ok := Decode(doc); !ok {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("utiljson", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var m map[string]any
			if err := utiljson.Unmarshal(doc, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
