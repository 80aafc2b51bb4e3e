package apiserver

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestBodyLimits(t *testing.T) {
	tests := []struct {
		name    string
		mt      string
		body    string
		wantErr bool
	}{
		{name: "flat JSON", mt: "application/json", body: `{"a":[1,2,{"b":"c"}]}`},
		{name: "brackets in strings", mt: "application/json", body: `{"a":"` + strings.Repeat("[{", 500) + `"}`},
		{name: "escaped quote", mt: "application/json", body: `{"a":"\"[[[["}`},
		{name: "deep after long strings", mt: "application/json", body: `{"a":"` + strings.Repeat("x", 1000) + `","b":"` + strings.Repeat("y", 13) + `","c":` +
			strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, wantErr: true},
		{name: "escaped backslash ends a string", mt: "application/json", body: `{"a":"` + strings.Repeat("x", 20) + `\\\\","b":` +
			strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, wantErr: true},
		{name: "escaped quote in a long string", mt: "application/json", body: `{"a":"` + strings.Repeat("x", 20) + `\"` + strings.Repeat("[", MaxDepth+1) + `"}`},
		{name: "deep JSON", mt: "application/json", body: strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), wantErr: true},
		{name: "just deep enough", mt: "application/json", body: strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)},
		{name: "YAML", mt: "application/yaml", body: "a:\n  b:\n  - c\n"},
		{name: "deep flow YAML", mt: "application/yaml", body: "a: " + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), wantErr: true},
		{name: "alias bomb", mt: "application/yaml", body: "a: &a [x]\n" + strings.Repeat("b: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n", 20), wantErr: true},
		{name: "bad YAML", mt: "application/yaml", body: "a: [", wantErr: true},
		{name: "asterisks in text are not aliases", mt: "application/yaml", body: "description: |\n" + strings.Repeat("  - *note* and *more*\n", 200)},
		{name: "a few aliases", mt: "application/yaml", body: "a: &x [1]\nb: *x\nc: *x\n"},
		{name: "unknown media type", mt: "application/xml", body: "<a/>", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toJSON(tt.mt, []byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// FuzzDecodeObject checks that no request body makes the decoder panic or
// accept a document nested deeper than MaxDepth.
func FuzzDecodeObject(f *testing.F) {
	f.Add("application/json", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`))
	f.Add("application/yaml", []byte("a:\n  b: [1, {c: d}]\n"))
	f.Add("application/yaml", []byte("a: &x [1]\nb: *x\n"))
	f.Add("application/json", []byte(`[[[[[[`))
	f.Fuzz(func(t *testing.T, mt string, body []byte) {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Content-Type", mt)
		obj, err := decodeObject(r, body)
		if err != nil {
			return
		}
		if depth(obj.Object) > MaxDepth+1 {
			t.Fatalf("accepted a document %d deep", depth(obj.Object))
		}
	})
}

func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	}
	return 0
}

func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 1024, 5000} {
		data := strings.Repeat("x", n)
		for _, size := range []int{1, 512, n + 1, n / 2} {
			if size < 1 {
				size = 1
			}
			got, err := readAll(iotest.OneByteReader(strings.NewReader(data)), size)
			if err != nil || string(got) != data {
				t.Errorf("readAll of %d bytes with a %d-byte buffer: %d bytes, %v", n, size, len(got), err)
			}
		}
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 8); err != io.ErrUnexpectedEOF {
		t.Errorf("readAll error = %v", err)
	}
}

// TestAcceptAndContentType: what the handlers read from Accept and
// Content-Type, the common values answered without parsing included.
func TestAcceptAndContentType(t *testing.T) {
	tests := []struct {
		name, accept string
		yaml         bool
		table        bool
		partial      bool
	}{
		{name: "none"},
		{name: "json", accept: "application/json"},
		{name: "client-go dynamic", accept: "application/json, */*"},
		{name: "yaml", accept: "application/yaml", yaml: true},
		{name: "yaml in capitals", accept: "Application/YAML", yaml: true},
		{name: "json before yaml", accept: "application/json, application/yaml"},
		{name: "yaml after an unknown type", accept: "text/plain, application/yaml", yaml: true},
		{name: "table", accept: "application/json;as=Table;v=v1;g=meta.k8s.io, application/json", table: true},
		{name: "table, parameter in capitals", accept: "application/json; AS=Table; v=v1; g=meta.k8s.io", table: true},
		{name: "partial", accept: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", partial: true},
		{name: "partial, wrong version", accept: "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			if got := wantsYAML(r); got != tt.yaml {
				t.Errorf("wantsYAML = %v, want %v", got, tt.yaml)
			}
			if got := acceptParams(r, "Table") != nil; got != tt.table {
				t.Errorf("acceptParams(Table) = %v, want %v", got, tt.table)
			}
			if got := wantsPartial(r); got != tt.partial {
				t.Errorf("wantsPartial = %v, want %v", got, tt.partial)
			}
		})
	}
	for ct, want := range map[string]string{
		"": "application/json", "application/json": "application/json", "application/json; charset=utf-8": "application/json",
		"Application/YAML": "application/yaml", "application/merge-patch+json": "application/merge-patch+json",
	} {
		r := httptest.NewRequest("POST", "/", nil)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if got := mediaType(r); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", ct, got, want)
		}
	}
}
