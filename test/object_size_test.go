package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

var sizedCRD = testsupport.CRD{
	Group: "limits.example.dev", Kind: "Blob", Status: true,
	Schema: `
type: object
properties:
  spec: {type: object, properties: {data: {type: string}}}
  status: {type: object, properties: {data: {type: string}}}
`,
}.String()

func blob(name string, n int) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "limits.example.dev/v1", "kind": "Blob",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"data": strings.Repeat("x", n)},
	})
	return string(b)
}

// --max-object-size bounds what any write stores, with kube-apiserver's
// answers: 413 for a request body over twice the bound, 500 "etcdserver:
// request is too large" for an object over it (created, replaced, patched,
// applied or given a status).
func TestObjectSizeLimitOnTheServer(t *testing.T) {
	const limit = 64 << 10
	s := testserver.Start(t, testserver.Options{Args: []string{"--max-object-size", fmt.Sprint(limit)}})
	if out, errOut, err := s.KubectlInput(sizedCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s%s", err, out, errOut)
	}
	const path = "/apis/limits.example.dev/v1/namespaces/default/blobs"
	testsupport.Eventually(t, 30*time.Second, "blobs served", func() bool {
		c, _, _ := s.Do("GET", path, s.Token, nil)
		return c == http.StatusOK
	})
	status := func(t *testing.T, code int, body []byte) metav1.Status {
		t.Helper()
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("%d %s", code, body)
		}
		return st
	}
	tooLarge := func(t *testing.T, what string, code int, body []byte) {
		t.Helper()
		if st := status(t, code, body); code != 500 || st.Message != "etcdserver: request is too large" {
			t.Errorf("%s: %d %q, want 500 etcdserver: request is too large", what, code, st.Message)
		}
	}

	code, body, _ := s.Do("POST", path, s.Token, strings.NewReader(blob("body", 2*limit)))
	if st := status(t, code, body); code != 413 || st.Message != fmt.Sprintf("Request entity too large: limit is %d", 2*limit) {
		t.Errorf("body over twice the limit: %d %q", code, st.Message)
	}
	code, body, _ = s.Do("POST", path, s.Token, strings.NewReader(blob("big", limit)))
	tooLarge(t, "create", code, body)
	if out, errOut, err := s.KubectlInput(blob("big", limit), "create", "-f", "-"); err == nil || !strings.Contains(errOut, "request is too large") {
		t.Errorf("kubectl create: %v %s%s", err, out, errOut)
	}
	if out, errOut, err := s.KubectlInput(blob("big", limit), "apply", "--server-side", "-f", "-"); err == nil || !strings.Contains(errOut, "request is too large") {
		t.Errorf("kubectl apply --server-side: %v %s%s", err, out, errOut)
	}

	code, body, _ = s.Do("POST", path, s.Token, strings.NewReader(blob("small", 10)))
	if code != http.StatusCreated {
		t.Fatalf("create small: %d %s", code, body)
	}
	if out, errOut, err := s.Kubectl("patch", "blob", "small", "--type=merge", "-p", `{"spec":{"data":"`+strings.Repeat("y", limit)+`"}}`); err == nil || !strings.Contains(errOut, "request is too large") {
		t.Errorf("kubectl patch: %v %s%s", err, out, errOut)
	}
	if out, errOut, err := s.Kubectl("patch", "blob", "small", "--subresource=status", "--type=merge", "-p", `{"status":{"data":"`+strings.Repeat("z", limit)+`"}}`); err == nil || !strings.Contains(errOut, "request is too large") {
		t.Errorf("kubectl patch --subresource=status: %v %s%s", err, out, errOut)
	}
	out, _, err := s.Kubectl("get", "blob", "small", "-o", "jsonpath={.spec.data}/{.status.data}")
	if err != nil || out != "xxxxxxxxxx/" {
		t.Errorf("after refused writes: %.40q %v", out, err)
	}
	// Just under the limit is stored.
	code, body, _ = s.Do("POST", path, s.Token, strings.NewReader(blob("fits", limit-400)))
	if code != http.StatusCreated {
		t.Errorf("create under the limit: %d %.200s", code, body)
	}
}
