package kinds

import (
	"bytes"
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// checkMarshalObject fails unless marshalObject gives MarshalJSON's bytes
// for obj, or declines it.
func checkMarshalObject(t *testing.T, obj map[string]any) bool {
	t.Helper()
	got, ok := marshalObject(obj)
	want, err := (&unstructured.Unstructured{Object: obj}).MarshalJSON()
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("marshalObject encoded %#v, which MarshalJSON refuses: %v", obj, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("marshalObject(%#v)\n = %s\nMarshalJSON\n = %s", obj, got, want)
	}
	return true
}

func TestMarshalObjectIsMarshalJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  map[string]any
		ok   bool
	}{
		{"empty", map[string]any{}, true},
		{"scalars", map[string]any{"s": "x", "i": int64(-3), "t": true, "f": false, "n": nil, "fl": 1.5, "big": 1e21, "small": 1e-7}, true},
		{"escapes", map[string]any{"a<b>&": "\"\\\n\t\b\f\r\x01\x7f<>&é\u2028\u2029\xff", "k": "plain"}, true},
		{"nested", map[string]any{"z": []any{map[string]any{"b": int64(1), "a": []any{}}, nil, "x"}, "a": map[string]any(nil), "l": []any(nil)}, true},
		{"NaN", map[string]any{"f": math.NaN()}, false},
		{"other types", map[string]any{"i": 1}, false},
		{"typed map", map[string]any{"m": map[string]string{"a": "b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkMarshalObject(t, tc.obj); got != tc.ok {
				t.Errorf("marshalObject handled it: %v, want %v", got, tc.ok)
			}
		})
	}
}

// FuzzMarshalObject checks marshalObject against MarshalJSON on objects
// decoded as the API decodes requests.
func FuzzMarshalObject(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"size":"small","n":3,"f":0.25}}`,
		`{"a":["<&>",1e300,-0.0,null,true,{"\u00e9":"\ud83d\ude00"}]}`,
		`{"b":"\u2028 \\ \" \t","":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(doc), &m); err != nil || m == nil {
			return
		}
		checkMarshalObject(t, m)
	})
}

func TestMarshalJSONExported(t *testing.T) {
	u := kindstest.Widget("a", "small", map[string]string{"k": "<v>"})
	got, err := MarshalJSON(u)
	want, _ := u.MarshalJSON()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("MarshalJSON = %s, %v; want %s", got, err, want)
	}
	// A type JSON decoding does not give: the same bytes, through MarshalJSON.
	u.Object["spec"].(map[string]any)["count"] = 3
	got, err = MarshalJSON(u)
	want, _ = u.MarshalJSON()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("MarshalJSON with an int = %s, %v; want %s", got, err, want)
	}
}
