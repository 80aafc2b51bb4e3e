package test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestUploadHasTheCompileDeadline uploads a module whose cold compile takes
// longer than the server's request timeout: the upload is not cut by the
// request timeout but has the compile timeout besides, and a compile past
// the compile timeout is refused with a message that names that flag.
func TestUploadHasTheCompileDeadline(t *testing.T) {
	wasm, err := os.ReadFile(wasmModule(t, "writer"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a compile longer than the request timeout", func(t *testing.T) {
		s := testserver.Start(t, testserver.Options{Args: []string{"--request-timeout", "100ms"}})
		start := time.Now()
		r := upload(t, s, wasm, "", "application/wasm")
		took := time.Since(start)
		t.Logf("%d-byte module compiled cold in %s against a 100ms request timeout: %d %s", len(wasm), took.Round(time.Millisecond), r.code, r.msg)
		if r.code != http.StatusCreated {
			t.Fatalf("upload: %d %q, want 201", r.code, r.msg)
		}
		if took < 100*time.Millisecond {
			t.Skipf("the compile took %s, less than the request timeout: nothing shown", took)
		}
		// Other requests keep the request timeout.
		if code, _, err := s.Do("GET", "/api/v1/namespaces", s.Token, nil); err != nil || code != http.StatusOK {
			t.Fatalf("list after the upload: %d %v", code, err)
		}
	})
	t.Run("a compile longer than the compile timeout", func(t *testing.T) {
		s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-compile-timeout", "20ms"}})
		r := upload(t, s, wasm, "", "application/wasm")
		t.Logf("compile timeout 20ms: %d %s", r.code, r.msg)
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.msg, "--plugin-compile-timeout") {
			t.Fatalf("upload: %d %q, want 422 naming --plugin-compile-timeout", r.code, r.msg)
		}
	})
}
