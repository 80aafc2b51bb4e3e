package plugins

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestUploadHandler(t *testing.T) {
	db := openTestDB(t)
	h := NewUploadHandler(UploadOptions{Modules: NewModules(db), Host: &fakeHost{current: map[string]string{}}, MaxBytes: 64, Logger: quietLogger()})
	good := []byte("a module")
	do := func(method, path, ct string, body []byte) (int, string) {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	tests := []struct {
		name, method, path, ct string
		body                   []byte
		code                   int
		contains               string
	}{
		{"upload", "POST", ModulesPath, "application/wasm", good, 201, digestOf(good)},
		{"upload again", "POST", ModulesPath, "application/wasm", good, 200, digestOf(good)},
		{"stated digest matches", "POST", ModulesPath + "?digest=" + digestOf(good), "application/wasm", good, 200, `"created":false`},
		{"stated digest is malformed", "POST", ModulesPath + "?digest=sha256:xyz", "application/wasm", good, 400, "64 lower-case hex"},
		{"too large", "POST", ModulesPath, "application/wasm", bytes.Repeat([]byte("x"), 65), 413, "limit"},
		{"empty", "POST", ModulesPath, "application/wasm", nil, 400, "no module bytes"},
		{"refused by the host", "POST", ModulesPath, "application/wasm", []byte("bad"), 422, "module refused: host: invalid module: bad bytes"},
		{"over the default memory cap", "POST", ModulesPath, "application/wasm", []byte("big"), 422, "exceeds the limit of 1024 pages"},
		{"checked with the Plugin's memory cap", "POST", ModulesPath + "?memoryPages=4096&callTimeout=2s&poolSize=2", "application/wasm", []byte("big"), 201, digestOf([]byte("big"))},
		{"memoryPages out of range", "POST", ModulesPath + "?memoryPages=70000", "application/wasm", []byte("other"), 400, "from 1 to 65536"},
		{"callTimeout not a duration", "POST", ModulesPath + "?callTimeout=soon", "application/wasm", []byte("other"), 400, "positive duration"},
		{"poolSize not a number", "POST", ModulesPath + "?poolSize=0", "application/wasm", []byte("other"), 400, "from 1 to 256"},
		{"wrong content type", "POST", ModulesPath, "text/plain", good, 415, "application/wasm"},
		{"read back", "GET", ModulesPath + "/" + digestOf(good), "", nil, 200, "a module"},
		{"a refused module was not stored", "GET", ModulesPath + "/" + digestOf([]byte("bad")), "", nil, 404, "no module"},
		{"modules are immutable", "DELETE", ModulesPath + "/" + digestOf(good), "", nil, 405, "immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.method, tt.path, tt.ct, tt.body)
			if code != tt.code || !strings.Contains(body, tt.contains) {
				t.Fatalf("%s %s: %d %s; want %d with %q", tt.method, tt.path, code, body, tt.code, tt.contains)
			}
			if code >= 400 {
				var st struct{ Kind string }
				if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
					t.Errorf("error body is not a Status: %s", body)
				}
			}
		})
	}
}
