package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// TestCreateBodyNamespace: a create's body may name the request's namespace
// or none (it gets the request's); another one is a 400.
func TestCreateBodyNamespace(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	crdYAML, err := os.ReadFile("../../examples/widget/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, api := newTestAPI(t, db, Options{})
	crd := httptest.NewRequest("POST", crdPath, bytes.NewReader(crdYAML))
	crd.Header.Set("Content-Type", "application/yaml")
	if w := serve(api, crd); w.Code != http.StatusCreated {
		t.Fatalf("CRD: %d %s", w.Code, w.Body)
	}
	tests := []struct {
		name, meta string
		code       int
		message    string
	}{
		{name: "none", meta: `{"name":"a"}`, code: http.StatusCreated},
		{name: "the request's", meta: `{"name":"b","namespace":"default"}`, code: http.StatusCreated},
		{name: "another", meta: `{"name":"c","namespace":"other"}`, code: http.StatusBadRequest,
			message: "the namespace of the provided object (other) does not match the namespace sent on the request (default)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":` + tt.meta + `,"spec":{"name":"n","size":"small"}}`
			r := httptest.NewRequest("POST", widgetsPath, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := serve(api, r)
			if w.Code != tt.code {
				t.Fatalf("code = %d, want %d: %s", w.Code, tt.code, w.Body)
			}
			var got struct {
				Metadata struct{ Namespace string } `json:"metadata"`
				Message  string                     `json:"message"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if tt.code == http.StatusCreated && got.Metadata.Namespace != "default" {
				t.Errorf("namespace = %q, want default", got.Metadata.Namespace)
			}
			if got.Message != tt.message {
				t.Errorf("message = %q, want %q", got.Message, tt.message)
			}
		})
	}
}
