package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestJSONPatchCannotNestDeep sends the built server JSON patches whose
// paths reach below the nesting the API takes in a body (100 levels), on a
// kind that keeps unknown fields. Operation by operation, each adding 90
// levels under the last, one patch of 60 operations (360 KB) built an
// object nested 5,400 deep in seconds of CPU, which no create or update
// could then write back. Such a patch must be refused with 422 and leave
// the object as it was; one that stays within the bound still applies.
func TestJSONPatchCannotNestDeep(t *testing.T) {
	do := deepBlobs(t)
	testsupport.Poll(t, 30*time.Second, "create blob", func() (bool, string) {
		code, b := do("POST", deepBlobsPath, "application/json", `{"apiVersion":"deep.example/v1","kind":"Blob","metadata":{"name":"b"},"spec":{}}`)
		return code == 201, fmt.Sprintf("%d %s", code, b)
	})
	nest := func(n int) any {
		var v any = map[string]any{}
		for range n {
			v = map[string]any{"a": v}
		}
		return v
	}
	// ops returns a patch of n operations, each adding 90 levels under the
	// place the one before added.
	ops := func(n int) string {
		var out []map[string]any
		path := "/spec/x"
		out = append(out, map[string]any{"op": "add", "path": path, "value": nest(90)})
		for range n - 1 {
			path += strings.Repeat("/a", 90) + "/b"
			out = append(out, map[string]any{"op": "add", "path": path, "value": nest(90)})
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	_, before := do("GET", deepBlobsPath+"/b", "application/json", "")
	for _, n := range []int{2, 60} {
		start := time.Now()
		code, b := do("PATCH", deepBlobsPath+"/b", "application/json-patch+json", ops(n))
		if code != 422 || !strings.Contains(string(b), "nests deeper than 100 levels") && !strings.Contains(string(b), "more than the 100 an object may nest") {
			t.Fatalf("patch of %d operations nesting %d deep: %d %.300s", n, 90*n, code, b)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("refusing a patch of %d operations took %v", n, d)
		}
	}
	if _, after := do("GET", deepBlobsPath+"/b", "application/json", ""); string(after) != string(before) {
		t.Fatalf("the refused patches changed the object:\n%.300s\n%.300s", before, after)
	}
	if code, b := do("PATCH", deepBlobsPath+"/b", "application/json-patch+json", ops(1)); code != 200 {
		t.Fatalf("patch nesting 90 deep: %d %.300s", code, b)
	}
}

// TestJSONPatchOnObjectNearDepthBound patches an object applied within the
// body nesting bound (97 levels) whose managed fields, which mirror its
// fields a few levels further down, nest past it: a JSON patch that adds
// nothing deep must still apply.
func TestJSONPatchOnObjectNearDepthBound(t *testing.T) {
	do := deepBlobs(t)
	var v any = map[string]any{"leaf": "x"}
	for range 94 {
		v = map[string]any{"a": v}
	}
	obj, _ := json.Marshal(map[string]any{"apiVersion": "deep.example/v1", "kind": "Blob", "metadata": map[string]any{"name": "b"}, "spec": v})
	testsupport.Poll(t, 30*time.Second, "create blob", func() (bool, string) {
		code, b := do("PATCH", deepBlobsPath+"/b?fieldManager=applier", "application/apply-patch+yaml", string(obj))
		return code == 201 || code == 200, fmt.Sprintf("%d %.300s", code, b)
	})
	if code, b := do("PATCH", deepBlobsPath+"/b", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels","value":{"k":"v"}}]`); code != 200 {
		t.Fatalf("patch adding a label: %d %.300s", code, b)
	}
}

// deepBlobsPath is where deepBlobs serves its Blobs.
const deepBlobsPath = "/apis/deep.example/v1/namespaces/default/blobs"

// deepBlobs starts a server serving Blobs (deep.example/v1, any fields)
// and returns how to send it a request with a body of type ct.
func deepBlobs(t *testing.T) func(method, path, ct, body string) (int, []byte) {
	t.Helper()
	s := testserver.Start(t, testserver.Options{})
	do := func(method, path, ct, body string) (int, []byte) {
		t.Helper()
		code, b, err := s.DoWith(method, path, s.Token, strings.NewReader(body), testserver.DoOptions{
			Header: map[string][]string{"Content-Type": {ct}}, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return code, b
	}
	crd := testsupport.CRD{Group: "deep.example", Kind: "Blob", Schema: `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`}
	if code, b := do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", crd.String()); code != 201 {
		t.Fatalf("create CRD: %d %s", code, b)
	}
	return do
}
