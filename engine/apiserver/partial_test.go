package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The tests in this file hold partialMetadata, which builds a
// PartialObjectMetadata from an object's metadata map by hand, to
// apimachinery's conversion (meta.AsPartialObjectMetadata, encoded as
// the typed object).

// libraryPartial is what apimachinery makes of u as a PartialObjectMetadata,
// decoded from its JSON.
func libraryPartial(t *testing.T, u *unstructured.Unstructured) any {
	t.Helper()
	p := meta.AsPartialObjectMetadata(u)
	p.APIVersion, p.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAny(t, b)
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

func marshalAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAny(t, b)
}

// randomMeta returns metadata of the shape the engine stores: every field
// ObjectMeta has, each present or not, maps and lists never empty (the
// typed encoding leaves an empty one out, as the engine does).
func randomMeta(rnd *rand.Rand) map[string]any {
	str := func() string { return randomString(rnd, 10) }
	ts := func() string {
		return time.Unix(1.7e9+rnd.Int64N(1e8), 0).UTC().Format(time.RFC3339)
	}
	m := map[string]any{
		"name":              "o" + fmt.Sprint(rnd.Uint32()),
		"uid":               fmt.Sprintf("%08x-0000-4000-8000-%012x", rnd.Uint32(), rnd.Uint64()>>16),
		"resourceVersion":   fmt.Sprint(rnd.Uint32()),
		"creationTimestamp": ts(),
	}
	maybe := func(k string, v func() any) {
		if rnd.IntN(2) == 0 {
			m[k] = v()
		}
	}
	strMap := func() any {
		out := map[string]any{}
		for range 1 + rnd.IntN(3) {
			out["k"+fmt.Sprint(rnd.IntN(100))] = str()
		}
		return out
	}
	maybe("namespace", func() any { return "ns" + fmt.Sprint(rnd.IntN(3)) })
	maybe("generateName", func() any { return "gen-" })
	maybe("generation", func() any { return rnd.Int64N(1 << 40) })
	maybe("deletionTimestamp", func() any { return ts() })
	maybe("deletionGracePeriodSeconds", func() any { return rnd.Int64N(60) })
	maybe("labels", strMap)
	maybe("annotations", strMap)
	maybe("finalizers", func() any {
		var out []any
		for range 1 + rnd.IntN(3) {
			out = append(out, "example.setpoint.dev/f"+fmt.Sprint(rnd.IntN(10)))
		}
		return out
	})
	maybe("ownerReferences", func() any {
		var out []any
		for range 1 + rnd.IntN(2) {
			ref := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
				"name": "p" + fmt.Sprint(rnd.IntN(9)), "uid": fmt.Sprintf("u-%d", rnd.IntN(1000))}
			if rnd.IntN(2) == 0 {
				ref["controller"] = rnd.IntN(2) == 0
			}
			if rnd.IntN(2) == 0 {
				ref["blockOwnerDeletion"] = rnd.IntN(2) == 0
			}
			out = append(out, ref)
		}
		return out
	})
	maybe("managedFields", func() any {
		var out []any
		for range 1 + rnd.IntN(2) {
			e := map[string]any{"manager": "m" + fmt.Sprint(rnd.IntN(3)), "operation": []string{"Apply", "Update"}[rnd.IntN(2)],
				"apiVersion": "example.setpoint.dev/v1", "time": ts(), "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:spec": map[string]any{"f:size": map[string]any{}}}}
			if rnd.IntN(3) == 0 {
				e["subresource"] = "status"
			}
			out = append(out, e)
		}
		return out
	})
	return m
}

// TestPartialMetadataMatchesLibrary compares partialMetadata with
// apimachinery's conversion on random metadata (fixed seed).
func TestPartialMetadataMatchesLibrary(t *testing.T) {
	rnd := rand.New(rand.NewPCG(14, 4))
	for i := range 500 {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": randomMeta(rnd), "spec": map[string]any{"size": "small"},
		}}
		want := libraryPartial(t, u)
		got := marshalAny(t, partialMetadata(u))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("object %d (-apimachinery +partialMetadata):\n%s", i, diff)
		}
	}
}

// TestPartialListsMatchLibrary: full and limited lists served as
// PartialObjectMetadataList hold, item for item, apimachinery's conversion
// of the engine's objects, and the list metadata a client decodes is the
// engine list's.
func TestPartialListsMatchLibrary(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	rnd := rand.New(rand.NewPCG(14, 5))
	for i := range 9 {
		obj := map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i),
				"labels":      map[string]any{"n": fmt.Sprint(i % 2)},
				"annotations": map[string]any{"note": randomString(rnd, 20)},
				"finalizers":  []any{"example.setpoint.dev/keep"}},
			"spec": map[string]any{"name": "W", "size": "small"}}
		b, _ := json.Marshal(obj)
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath, body: string(b)})
	}
	// The finalizers keep the objects; the test's cleanup closes the store.
	gvr := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	const accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

	check := func(t *testing.T, body []byte, opts metav1.ListOptions) string {
		t.Helper()
		l, err := ts.eng.List(context.Background(), gvr, "default", opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			t.Fatal("the engine lists nothing: the comparison would be vacuous")
		}
		var got struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Metadata   metav1.ListMeta `json:"metadata"`
			Items      []json.RawMessage
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.APIVersion != "meta.k8s.io/v1" || got.Kind != "PartialObjectMetadataList" {
			t.Errorf("list is %s %s", got.APIVersion, got.Kind)
		}
		if want := (metav1.ListMeta{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue()}); got.Metadata != want {
			t.Errorf("list metadata %+v, want %+v", got.Metadata, want)
		}
		if len(got.Items) != len(l.Items) {
			t.Fatalf("%d items, the engine lists %d", len(got.Items), len(l.Items))
		}
		for i := range l.Items {
			if diff := cmp.Diff(libraryPartial(t, &l.Items[i]), decodeAny(t, got.Items[i])); diff != "" {
				t.Errorf("item %d (-apimachinery +response):\n%s", i, diff)
			}
		}
		return l.GetContinue()
	}
	t.Run("full", func(t *testing.T) {
		check(t, ts.mustDo(t, http.StatusOK, request{path: widgetsPath, accept: accept}), metav1.ListOptions{})
		check(t, ts.mustDo(t, http.StatusOK, request{path: widgetsPath + "?labelSelector=n%3D1", accept: accept}),
			metav1.ListOptions{LabelSelector: "n=1"})
	})
	t.Run("limited", func(t *testing.T) {
		opts := metav1.ListOptions{Limit: 4}
		pages := 0
		for {
			path := widgetsPath + "?limit=4"
			if opts.Continue != "" {
				path += "&continue=" + opts.Continue
			}
			pages++
			if opts.Continue = check(t, ts.mustDo(t, http.StatusOK, request{path: path, accept: accept}), opts); opts.Continue == "" {
				break
			}
		}
		if pages < 2 {
			t.Errorf("%d pages: the continue path was not compared", pages)
		}
	})
}
