package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestCountSelected: the count of a selector is the length of the List of
// it, across namespaces and over more than a page of the store.
func TestCountSelected(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "other"}}}
	if _, err := s.Create(ctx, kinds.NamespaceResource, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range countPage + 5 {
		w := widget(fmt.Sprintf("w%04d", i), "small", map[string]string{"env": []string{"dev", "prod", "test"}[i%3]})
		if i%2 == 1 {
			w.SetNamespace("other")
		}
		mustCreate(t, s, w)
	}
	for _, sel := range []string{"", "env=dev", "env in (dev,prod)", "env!=dev", "!env", "env,team"} {
		t.Run(sel, func(t *testing.T) {
			parsed, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.CountSelected(ctx, widgets, parsed)
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.List(ctx, widgets, "", metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			if got != len(l.Items) {
				t.Errorf("CountSelected = %d, List has %d", got, len(l.Items))
			}
		})
	}
	missing := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "gadgets"}
	if _, err := s.CountSelected(ctx, missing, labels.Everything()); !apierrors.IsNotFound(err) {
		t.Errorf("count of an unserved resource: %v, want NotFound", err)
	}
}

// TestStoredLabels: labels are read as the engine's decoding reads them:
// keys matched exactly, the last of duplicates winning, and a document the
// scan does not handle decoded whole.
func TestStoredLabels(t *testing.T) {
	tests := []struct {
		name, doc string
		want      map[string]string // nil: no labels
	}{
		{name: "plain", doc: `{"kind":"W","metadata":{"name":"a","labels":{"a":"1","b":"2"}},"spec":{"x":[1,{"y":"}"}]}}`, want: map[string]string{"a": "1", "b": "2"}},
		{name: "none", doc: `{"metadata":{"name":"a"}}`},
		{name: "null", doc: `{"metadata":{"name":"a","labels":null}}`},
		{name: "keys exact", doc: `{"METADATA":{"labels":{"a":"1"}},"metadata":{"Labels":{"b":"2"}}}`},
		{name: "last metadata wins", doc: `{"metadata":{"labels":{"a":"1"}},"metadata":{"labels":{"b":"2"}}}`, want: map[string]string{"b": "2"}},
		{name: "last label wins", doc: `{"metadata":{"labels":{"a":"1","a":"2"}}}`, want: map[string]string{"a": "2"}},
		{name: "labels after the rest", doc: `{"spec":{"labels":{"no":"x"}},"metadata":{"annotations":{"c":"3"},"labels":{"a":"1"}}}`, want: map[string]string{"a": "1"}},
		{name: "not a string, decoded whole", doc: `{"metadata":{"labels":{"a":1}}}`},
		{name: "not JSON", doc: `{"metadata":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := storedLabels([]byte(tt.doc))
			for k, v := range tt.want {
				if g, ok := got.Lookup(k); !ok || g != v {
					t.Errorf("label %s = %q, %v; want %q", k, g, ok, v)
				}
			}
			for _, k := range []string{"a", "b", "c", "no"} {
				if _, want := tt.want[k]; !want && got.Has(k) {
					t.Errorf("label %s = %q, want none", k, got.Get(k))
				}
			}
		})
	}
}

// TestListSelectsOnTheObjectsMetadata: a list's selectors read the
// object's own metadata, as its decoding and a watch's filter do, not a
// member of a custom resource that spells "metadata" in other letters.
func TestListSelectsOnTheObjectsMetadata(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	crd := testsupport.CRD{Kind: "Note", Schema: `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`}
	if _, err := s.Create(ctx, kinds.CRDResource, crd.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notes := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "notes"}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Note",
		"metadata": map[string]any{"name": "n", "namespace": "default", "labels": map[string]any{"team": "a"}},
		"METADATA": map[string]any{"name": "other", "labels": map[string]any{"team": "b", "extra": "x"}}}}
	testsupport.Poll(t, 10*time.Second, "the Note created", func() (bool, string) {
		_, err := s.Create(ctx, notes, u, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	for _, tt := range []struct {
		labels, fields string
		want           int
	}{
		{labels: "team=a", want: 1},
		{labels: "team=b"},
		{labels: "extra"},
		{labels: "!extra", want: 1},
		{fields: "metadata.name=n", want: 1},
		{fields: "metadata.name=other"},
	} {
		l, err := s.List(ctx, notes, "", metav1.ListOptions{LabelSelector: tt.labels, FieldSelector: tt.fields})
		if err != nil || len(l.Items) != tt.want {
			t.Errorf("list %q %q: %d items, %v; want %d", tt.labels, tt.fields, len(l.Items), err, tt.want)
		}
		sel, err := labels.Parse(tt.labels)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.CountSelected(ctx, notes, sel); tt.fields == "" && (err != nil || n != tt.want) {
			t.Errorf("count %q: %d, %v; want %d", tt.labels, n, err, tt.want)
		}
	}
}
