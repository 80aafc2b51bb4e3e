package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
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

// TestApplyServerSideConflictHints: a field-manager conflict points to
// --force-conflicts and not to a stale resourceVersion; a stale
// resourceVersion (the manifest's) says so, and not --force-conflicts.
func TestApplyServerSideConflictHints(t *testing.T) {
	gr := schema.GroupResource{Group: "example.setpoint.dev", Resource: "widgets"}
	stale := apierrors.NewConflict(gr, "a", errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	for _, tt := range []struct {
		name         string
		status       error
		force        bool
		wants, lacks []string
	}{
		{name: "field manager conflict", status: applyConflict(),
			wants: []string{"Apply failed with 1 conflict", "--force-conflicts takes these fields over"},
			lacks: []string{"changed since you read it"}},
		{name: "stale resourceVersion", status: stale,
			wants: []string{"the object has been modified", "changed since you read it"},
			lacks: []string{"--force-conflicts"}},
		{name: "stale resourceVersion, forced", status: stale, force: true,
			wants: []string{"changed since you read it"},
			lacks: []string{"--force-conflicts"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				st := apierrors.NewNotFound(gr, "a").ErrStatus
				if r.Method == http.MethodPatch {
					st = tt.status.(*apierrors.StatusError).ErrStatus
				}
				st.Kind, st.APIVersion = "Status", "v1"
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(int(st.Code))
				_ = json.NewEncoder(w).Encode(st)
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL}
			dc, err := dynamic.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := &client{config: cfg, dynamic: dc}
			ri := dc.Resource(gr.WithVersion("v1")).Namespace("default")
			u := obj(t, `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a","namespace":"default","resourceVersion":"1"},"spec":{"size":"large"}}`)
			_, err = applyServerSide(t.Context(), c, ri, "widget.example.setpoint.dev/a", u, nil, &applyOptions{fieldManager: "other", forceConflicts: tt.force})
			if exitCode(err) != exitConflict {
				t.Fatalf("exit %d, want %d: %v", exitCode(err), exitConflict, err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			for _, l := range tt.lacks {
				if strings.Contains(err.Error(), l) {
					t.Errorf("%q says %q", err, l)
				}
			}
		})
	}
}
