package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
)

// The tests in this file hold the hand-written list encoders
// (writeJSONList, streamJSONList) to what apimachinery writes for the same
// UnstructuredList.

// trickyRunes are the characters JSON encoders treat apart: quotes,
// backslashes, HTML characters, control characters, line separators and
// non-ASCII text.
var trickyRunes = []rune("ab09 \"\\<>&\x00\x01\x1f\x7f\t\n\u2028\u2029é漢😀/")

func randomString(rnd *rand.Rand, maxLen int) string {
	var b strings.Builder
	for range rnd.IntN(maxLen + 1) {
		b.WriteRune(trickyRunes[rnd.IntN(len(trickyRunes))])
	}
	return b.String()
}

// randomValue returns a value of the kinds an unstructured object holds.
func randomValue(rnd *rand.Rand, depth int) any {
	n := 7
	if depth > 2 {
		n = 5 // scalars only
	}
	switch rnd.IntN(n) {
	case 0:
		return randomString(rnd, 12)
	case 1:
		return rnd.Int64() >> rnd.IntN(64)
	case 2:
		return rnd.NormFloat64() * float64(int64(1)<<rnd.IntN(60))
	case 3:
		return rnd.IntN(2) == 0
	case 4:
		return nil
	case 5:
		l := make([]any, rnd.IntN(4))
		for i := range l {
			l[i] = randomValue(rnd, depth+1)
		}
		return l
	default:
		m := map[string]any{}
		for range rnd.IntN(4) {
			m[randomString(rnd, 6)] = randomValue(rnd, depth+1)
		}
		return m
	}
}

func randomList(rnd *rand.Rand) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(randomString(rnd, 10) + "/v1")
	l.SetKind("W" + randomString(rnd, 8) + "List")
	l.SetResourceVersion(fmt.Sprint(rnd.Uint64()))
	if c := randomString(rnd, 20); c != "" && rnd.IntN(2) == 0 {
		l.SetContinue(c) // an empty continue is left out, as ListMeta leaves it
	}
	for range rnd.IntN(5) {
		it := unstructured.Unstructured{Object: map[string]any{
			"apiVersion": l.GetAPIVersion(), "kind": "W",
			"metadata": map[string]any{"name": randomString(rnd, 8)},
			"spec":     randomValue(rnd, 0),
		}}
		l.Items = append(l.Items, it)
	}
	return l
}

// jsonListOf returns l as the engine hands it to writeJSONList: its items
// each as their own JSON.
func jsonListOf(t *testing.T, l *unstructured.UnstructuredList) *engine.JSONList {
	t.Helper()
	jl := &engine.JSONList{APIVersion: l.GetAPIVersion(), Kind: l.GetKind(),
		ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue()}
	for i := range l.Items {
		b, err := json.Marshal(&l.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		jl.Items = append(jl.Items, b)
	}
	return jl
}

// TestWriteJSONListMatchesMarshal: writeJSONList writes, byte for byte,
// what json.Marshal writes for the UnstructuredList (and a newline, as
// json.Encoder does), on chosen lists and random ones of a fixed seed.
func TestWriteJSONListMatchesMarshal(t *testing.T) {
	list := func(apiVersion, kind, rv, cont string, items ...map[string]any) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind)
		l.SetResourceVersion(rv)
		if cont != "" {
			l.SetContinue(cont)
		}
		for _, it := range items {
			l.Items = append(l.Items, unstructured.Unstructured{Object: it})
		}
		return l
	}
	lists := []*unstructured.UnstructuredList{
		list("v1", "ConfigMapList", "1", ""),
		list("example.setpoint.dev/v1", "WidgetList", "42", "",
			map[string]any{"apiVersion": "example.setpoint.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": "a"}}),
		list("example.setpoint.dev/v1", "WidgetList", "42", "eyJydiI6NDJ9",
			map[string]any{"kind": "Widget", "spec": map[string]any{"html": "<a href=\"x\">&</a>"}},
			map[string]any{"kind": "Widget", "spec": map[string]any{"n": int64(-7), "f": 1.5e300, "b": true, "z": nil}}),
		list("g<&>/v1", "K\"\\List", "\u2028", "c\x00\x1f"),
		list("é/v1", "漢List", "9", "😀"),
	}
	rnd := rand.New(rand.NewPCG(14, 1))
	for range 500 {
		lists = append(lists, randomList(rnd))
	}
	for i, l := range lists {
		want, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		rec := httptest.NewRecorder()
		writeJSONList(rec, jsonListOf(t, l))
		if got := rec.Body.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("list %d: writeJSONList wrote\n%s\njson.Marshal\n%s", i, got, want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
	}
}

// TestListResponsesMatchEngineList: full lists streamed a page at a time
// (streamJSONList), and pages of a limited list (writeJSONList), answer
// what json.Marshal of the engine's UnstructuredList for the same request
// gives (with its metadata as ListMeta encodes it), up to the order of
// keys (stored items keep theirs), for objects of random content (fixed
// seed).
func TestListResponsesMatchEngineList(t *testing.T) {
	ts := newTestServer(t)
	ts.registerBlobs(t)
	rnd := rand.New(rand.NewPCG(14, 2))
	for i := range 23 {
		data, _ := json.Marshal(randomString(rnd, 40))
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath,
			body: fmt.Sprintf(`{"apiVersion":"test.setpoint.dev/v1","kind":"Blob","metadata":{"name":"b%02d","labels":{"n":"%d"}},"data":%s}`, i, i%3, data)})
	}
	paged, err := New(Options{Engine: ts.eng})
	if err != nil {
		t.Fatal(err)
	}
	paged.pageSize = 3
	ps := httptest.NewServer(paged)
	defer ps.Close()
	pts := &testServer{Server: ps, api: paged, eng: ts.eng, db: ts.db}
	gvr := schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: "blobs"}

	decode := func(t *testing.T, b []byte) any {
		t.Helper()
		var v any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return v
	}
	want := func(t *testing.T, opts metav1.ListOptions) (any, *unstructured.UnstructuredList) {
		t.Helper()
		l, err := ts.eng.List(context.Background(), gvr, "default", opts)
		if err != nil {
			t.Fatal(err)
		}
		// The list's metadata as ListMeta encodes it: the engine sets an
		// empty continue on the last page, which ListMeta leaves out.
		if l.GetContinue() == "" {
			unstructured.RemoveNestedField(l.Object, "metadata", "continue")
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, b), l
	}
	for _, tc := range []struct{ name, selector string }{
		{name: "all"},
		{name: "label selector", selector: "n=1"},
		{name: "field selector", selector: "metadata.name!=b04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{}
			opts := metav1.ListOptions{}
			if strings.HasPrefix(tc.selector, "metadata.") {
				q.Set("fieldSelector", tc.selector)
				opts.FieldSelector = tc.selector
			} else if tc.selector != "" {
				q.Set("labelSelector", tc.selector)
				opts.LabelSelector = tc.selector
			}
			for _, srv := range []struct {
				name string
				ts   *testServer
			}{{"pages of 3", pts}, {"pages of 500", ts}} {
				body := srv.ts.mustDo(t, http.StatusOK, request{path: blobsPath + "?" + q.Encode()})
				if !bytes.HasSuffix(body, []byte("}}\n")) {
					t.Errorf("%s: the list does not end in a newline: %q", srv.name, body[max(0, len(body)-10):])
				}
				w, l := want(t, opts)
				if len(l.Items) == 0 {
					t.Fatal("the engine lists nothing: the comparison would be vacuous")
				}
				if diff := cmp.Diff(w, decode(t, body)); diff != "" {
					t.Errorf("%s: full list (-engine.List +response):\n%s", srv.name, diff)
				}
			}

			// A limited list, page by page: writeJSONList with continue.
			popts := opts
			popts.Limit = 4
			pages := 0
			for {
				pq := url.Values{}
				for k, v := range q {
					pq[k] = v
				}
				pq.Set("limit", "4")
				if popts.Continue != "" {
					pq.Set("continue", popts.Continue)
				}
				body := ts.mustDo(t, http.StatusOK, request{path: blobsPath + "?" + pq.Encode()})
				w, l := want(t, popts)
				if diff := cmp.Diff(w, decode(t, body)); diff != "" {
					t.Fatalf("page %d (-engine.List +response):\n%s", pages, diff)
				}
				pages++
				if popts.Continue = l.GetContinue(); popts.Continue == "" {
					break
				}
			}
			if pages < 2 {
				t.Errorf("%d pages: the continue path was not compared", pages)
			}
		})
	}
}
