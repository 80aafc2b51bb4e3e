package main

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(js), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestThreeWayPatch(t *testing.T) {
	const applied = `{"apiVersion":"v1","kind":"W","metadata":{"name":"a"},"spec":{"size":"small","color":"blue"}}`
	withAnnotation := func(spec string) string {
		b, _ := json.Marshal(applied + "\n")
		return `{"apiVersion":"v1","kind":"W","metadata":{"name":"a","resourceVersion":"7","annotations":{"` + lastAppliedAnnotation + `":` + string(b) + `}},"spec":` + spec + `}`
	}
	tests := []struct {
		name     string
		modified string
		current  string
		want     string // "" means no patch
	}{
		{name: "unchanged, server defaults kept",
			modified: withAnnotation(`{"size":"small","color":"blue"}`),
			current:  withAnnotation(`{"size":"small","color":"blue","defaulted":"x"}`)},
		{name: "a changed field",
			modified: withAnnotation(`{"size":"large","color":"blue"}`),
			current:  withAnnotation(`{"size":"small","color":"blue"}`),
			want:     `{"metadata":{"resourceVersion":"7"},"spec":{"size":"large"}}`},
		{name: "a field removed from the manifest is removed",
			modified: withAnnotation(`{"size":"small"}`),
			current:  withAnnotation(`{"size":"small","color":"blue"}`),
			want:     `{"metadata":{"resourceVersion":"7"},"spec":{"color":null}}`},
		{name: "someone else's field stays",
			modified: withAnnotation(`{"size":"small","color":"blue"}`),
			current:  withAnnotation(`{"size":"small","color":"blue","owner":"ops"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := threeWayPatch(obj(t, tt.modified), obj(t, tt.current), false)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if patch != nil {
					t.Fatalf("patch %s, want none", patch)
				}
				return
			}
			var got, want any
			_ = json.Unmarshal(patch, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("patch %s, want %s", gb, wb)
			}
		})
	}
}

func TestApplyRank(t *testing.T) {
	for _, tt := range []struct {
		apiVersion, kind string
		rank             int
	}{
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", 0},
		{"v1", "Namespace", 1},
		{"setpoint.dev/v1alpha1", "Plugin", 2},
		{"example.setpoint.dev/v1", "Widget", 3},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tt.apiVersion)
		u.SetKind(tt.kind)
		if got := applyRank(u); got != tt.rank {
			t.Errorf("%s %s: rank %d, want %d", tt.apiVersion, tt.kind, got, tt.rank)
		}
	}
}
