package objjson

import (
	"strings"
	"testing"
)

func TestDeeper(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		max  int
		want bool
	}{
		{name: "flat", doc: `{"a":1}`, max: 1, want: false},
		{name: "at the bound", doc: `{"a":[{"b":{}}]}`, max: 4, want: false},
		{name: "past the bound", doc: `{"a":[{"b":{}}]}`, max: 3, want: true},
		{name: "brackets in strings", doc: `{"a":"[[[{{{\"[[[[","b":["]]]"]}`, max: 2, want: false},
		{name: "escaped backslash ends the string", doc: `{"a":"\\","b":[[[]]]}`, max: 3, want: true},
		{name: "deep", doc: strings.Repeat("[", 101) + strings.Repeat("]", 101), max: 100, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Deeper([]byte(tt.doc), tt.max); got != tt.want {
				t.Fatalf("Deeper(%s, %d) = %v, want %v", tt.doc, tt.max, got, tt.want)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	for doc, want := range map[string]int{
		`1`: 0, `{}`: 1, `{"a":[{"b":"[{"}]}`: 3, `["\"[",{"x":{}}]`: 3,
		`{"a":{}}` + strings.Repeat("[", 5) + strings.Repeat("]", 5): 5,
	} {
		if got := Depth([]byte(doc)); got != want {
			t.Errorf("Depth(%s) = %d, want %d", doc, got, want)
		}
	}
}
