package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseManifests(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		wantNames []string
		wantLines []int
		wantErr   string // substring; "" means no error
		wantCode  int
	}{
		{name: "multi-document YAML with comments and empty documents",
			data:      "# header\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n...\n",
			wantNames: []string{"a", "b"}, wantLines: []int{3, 9}},
		{name: "JSON stream",
			data:      "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\"}}\n\n  {\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"b\"}}\n",
			wantNames: []string{"a", "b"}, wantLines: []int{1, 3}},
		{name: "List is expanded",
			data:      "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n",
			wantNames: []string{"a", "b"}, wantLines: []int{1, 1}},
		{name: "YAML error names the line in the file",
			data:    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: [b\n",
			wantErr: "f.yaml:8: YAML", wantCode: exitInvalid},
		{name: "tab indentation",
			data:    "apiVersion: v1\nkind: Namespace\nmetadata:\n\tname: a\n",
			wantErr: "f.yaml:4: YAML", wantCode: exitInvalid},
		{name: "duplicate key",
			data:    "apiVersion: v1\nkind: Namespace\nkind: Namespace\nmetadata: {name: a}\n",
			wantErr: "f.yaml:", wantCode: exitInvalid},
		{name: "JSON syntax error names the line",
			data:    "{\"apiVersion\":\"v1\",\n\"kind\": \"Namespace\",,\n}",
			wantErr: "f.yaml:2: JSON", wantCode: exitInvalid},
		{name: "missing kind", data: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: "f.yaml:1: the object has no kind", wantCode: exitInvalid},
		{name: "missing apiVersion and kind", data: "metadata: {name: a}\n", wantErr: "no apiVersion and kind", wantCode: exitInvalid},
		{name: "missing name", data: "apiVersion: v1\nkind: Namespace\n", wantErr: "no metadata.name", wantCode: exitInvalid},
		{name: "not a mapping", data: "- a\n- b\n", wantErr: "not an object", wantCode: exitInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := parseManifests("f.yaml", []byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if got := exitCode(err); got != tt.wantCode {
					t.Errorf("exit code %d, want %d", got, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var lines []int
			for _, m := range ms {
				names = append(names, m.obj.GetName())
				lines = append(lines, m.line)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("names %v, want %v", names, tt.wantNames)
			}
			for i := range lines {
				if i < len(tt.wantLines) && lines[i] != tt.wantLines[i] {
					t.Errorf("lines %v, want %v", lines, tt.wantLines)
					break
				}
			}
		})
	}
}

func TestReadManifestsDirectories(t *testing.T) {
	dir := t.TempDir()
	ns := func(n string) string { return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + n + "}\n" }
	for name, content := range map[string]string{
		"a.yaml":          ns("a"),
		"b.json":          `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}}`,
		"notes.txt":       "not a manifest",
		"sub/c.yml":       ns("c"),
		"sub/deep/d.yaml": ns("d"),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ms []manifest) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.obj.GetName())
		}
		return strings.Join(out, ",")
	}
	flat, err := readManifests([]string{dir}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(flat); got != "a,b" {
		t.Errorf("flat: %s", got)
	}
	deep, err := readManifests([]string{dir}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(deep); got != "a,b,c,d" {
		t.Errorf("recursive: %s", got)
	}
	stdin, err := readManifests([]string{"-"}, false, strings.NewReader(ns("x")))
	if err != nil || names(stdin) != "x" || stdin[0].source != "<stdin>" {
		t.Errorf("stdin: %v %v", names(stdin), err)
	}
	_, err = readManifests([]string{filepath.Join(dir, "missing.yaml")}, false, nil)
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "missing.yaml: no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzParseManifests: any input either parses into objects that each have a
// kind, an apiVersion and a line inside the input, or fails with a message
// that names the source; it never panics.
func FuzzParseManifests(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}]}`,
		"a: [b\n", "---\n---\n", "{", "- 1\n", "apiVersion: v1\nkind: X\nmetadata:\n  name: &a x\n  labels: *a\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := parseManifests("in.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "in.yaml:") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, m := range ms {
			if m.obj.GetKind() == "" || m.obj.GetAPIVersion() == "" {
				t.Fatalf("object without kind or apiVersion: %v", m.obj.Object)
			}
			if m.line < 1 || m.line > lines {
				t.Fatalf("line %d outside the input's %d lines", m.line, lines)
			}
		}
	})
}
