package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodecIsCurrent regenerates the codec into a temporary
// directory and compares it with the committed file, so that a change to
// a document's type without `go generate` fails make test.
func TestGeneratedCodecIsCurrent(t *testing.T) {
	src, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), Output)
	if err := os.WriteFile(fresh, src, 0o644); err != nil {
		t.Fatal(err)
	}
	regenerated, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("../..", Output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(regenerated, committed) {
		t.Fatalf("sdk/abi/%s is stale: run `go generate ./abi/` in sdk", Output)
	}
}

// TestGenerateRejects checks that a document the generator cannot encode
// faithfully is an error rather than a codec that drops a member.
func TestGenerateRejects(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"untagged field", "//abi:document\ntype D struct{ A string }", "no abi tag"},
		{"unknown option", "//abi:document\ntype D struct{ A string `abi:\"a,sometimes\"` }", "unknown option"},
		{"unknown directive option", "//abi:document fast\ntype D struct{ A string `abi:\"a\"` }", "unknown option"},
		{"last not final", "//abi:document aliased\ntype D struct {\n\tA RawJSON `abi:\"a,last\"`\n\tB string `abi:\"b\"`\n}", "final field"},
		{"always on a string", "//abi:document\ntype D struct{ A string `abi:\"a,always\"` }", "always applies to bools"},
		{"result without error", "//abi:document\ntype D struct{ A []RawJSON `abi:\"a,result\"` }", "needs an Error"},
		{"duplicate key", "//abi:document\ntype D struct {\n\tA string `abi:\"a\"`\n\tB string `abi:\"a\"`\n}", "twice"},
		{"unsupported type", "//abi:document\ntype D struct{ A float64 `abi:\"a\"` }", "unsupported type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package abi\n\ntype RawJSON []byte\n\n" + tt.src + "\n"
			if err := os.WriteFile(filepath.Join(dir, "abi.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Generate(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}
