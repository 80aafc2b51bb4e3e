package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWaitConditions(t *testing.T) {
	ready := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{
			"state":      "Ready",
			"capacity":   int64(16),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
		},
	}}
	for _, tc := range []struct {
		name   string
		forArg string
		obj    *unstructured.Unstructured
		want   bool
		bad    bool
	}{
		{name: "condition", forArg: "condition=Ready", obj: ready, want: true},
		{name: "condition any case", forArg: "condition=ready", obj: ready, want: true},
		{name: "condition status", forArg: "condition=Ready=False", obj: ready, want: false},
		{name: "condition absent", forArg: "condition=Established", obj: ready, want: false},
		{name: "jsonpath value", forArg: "jsonpath={.status.state}=Ready", obj: ready, want: true},
		{name: "jsonpath number", forArg: "jsonpath={.status.capacity}=16", obj: ready, want: true},
		{name: "jsonpath other value", forArg: "jsonpath={.status.state}=Gone", obj: ready, want: false},
		{name: "jsonpath without braces", forArg: "jsonpath=.status.state=Ready", obj: ready, want: true},
		{name: "jsonpath exists", forArg: "jsonpath={.status.state}", obj: ready, want: true},
		{name: "jsonpath missing", forArg: "jsonpath={.status.nothing}", obj: ready, want: false},
		{name: "delete, present", forArg: "delete", obj: ready, want: false},
		{name: "delete, gone", forArg: "delete", obj: nil, want: true},
		{name: "create, gone", forArg: "create", obj: nil, want: false},
		{name: "condition, gone", forArg: "condition=Ready", obj: nil, want: false},
		{name: "empty", forArg: "", bad: true},
		{name: "unknown", forArg: "ready", bad: true},
		{name: "condition without type", forArg: "condition=", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := parseWaitFor(tc.forArg)
			if tc.bad {
				if err == nil || exitCode(err) != exitUsage {
					t.Fatalf("parseWaitFor(%q) = %v, want a usage error", tc.forArg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := w.met(tc.obj); got != tc.want {
				t.Errorf("--for=%s met = %v, want %v", tc.forArg, got, tc.want)
			}
		})
	}
}
