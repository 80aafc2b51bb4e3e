package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/setpoint-dev/setpoint/host"
)

func TestSplitPermissions(t *testing.T) {
	tests := []struct {
		name              string
		read, write, perm []string
		wantRead          []string
		wantWrite         []string
		wantErr           bool
	}{
		{name: "none"},
		{name: "read and write", perm: []string{"read=widgets", "write=events", "READ=gadgets"},
			wantRead: []string{"widgets", "gadgets"}, wantWrite: []string{"events"}},
		{name: "added to --read and --write", read: []string{"a"}, write: []string{"b"}, perm: []string{"read=c", " write = d "},
			wantRead: []string{"a", "c"}, wantWrite: []string{"b", "d"}},
		{name: "star", perm: []string{"read=*"}, wantRead: []string{"*"}},
		{name: "no equals", perm: []string{"widgets"}, wantErr: true},
		{name: "empty resource", perm: []string{"read="}, wantErr: true},
		{name: "unknown verb", perm: []string{"delete=widgets"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &pluginOptions{read: tt.read, write: tt.write, permissions: tt.perm}
			err := o.splitPermissions()
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				if got := exitCode(err); got != exitUsage {
					t.Errorf("exit code %d, want %d (usage)", got, exitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.wantRead, o.read); d != "" {
				t.Errorf("read (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantWrite, o.write); d != "" {
				t.Errorf("write (-want +got):\n%s", d)
			}
		})
	}
}

// TestPluginUpgradeRetriesStatusConflicts: the server writes a Plugin's
// status as it loads and runs modules, so its resourceVersion moves between
// upgrade's read and its patch; upgrade reads it again and retries when only
// that happened, and reports a conflict when the spec changed meanwhile.
func TestPluginUpgradeRetriesStatusConflicts(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	file := filepath.Join(t.TempDir(), "p.wasm")
	if err := os.WriteFile(file, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name        string
		otherDigest bool // someone else upgrades between the read and the patch
		code        int
		patches     int
	}{
		{name: "status written meanwhile", code: exitOK, patches: 2},
		{name: "spec changed meanwhile", otherDigest: true, code: exitConflict, patches: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			rv, digest, patches := 1, "sha256:old", 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				plugin := func() map[string]any {
					return map[string]any{"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin",
						"metadata": map[string]any{"name": "p", "resourceVersion": strconv.Itoa(rv)},
						"spec":     map[string]any{"module": map[string]any{"digest": digest}}}
				}
				switch {
				case r.Method == http.MethodPost && r.URL.Path == modulesPath:
					_ = json.NewEncoder(w).Encode(map[string]string{"digest": host.Digest(wasm)})
					// The server loads something and writes the status.
					rv++
					if tt.otherDigest {
						digest = "sha256:other"
					}
				case r.Method == http.MethodGet && r.URL.Path == "/apis/setpoint.dev/v1alpha1/plugins/p":
					_ = json.NewEncoder(w).Encode(plugin())
				case r.Method == http.MethodPatch && r.URL.Path == "/apis/setpoint.dev/v1alpha1/plugins/p":
					patches++
					var p struct {
						Metadata struct{ ResourceVersion string } `json:"metadata"`
					}
					b, _ := io.ReadAll(r.Body)
					_ = json.Unmarshal(b, &p)
					if p.Metadata.ResourceVersion != strconv.Itoa(rv) {
						st := apierrors.NewConflict(pluginGVR.GroupResource(), "p", errors.New("the object has been modified")).ErrStatus
						st.Kind, st.APIVersion = "Status", "v1"
						w.WriteHeader(http.StatusConflict)
						_ = json.NewEncoder(w).Encode(st)
						return
					}
					rv++
					digest = host.Digest(wasm)
					_ = json.NewEncoder(w).Encode(plugin())
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
			o := &pluginOptions{client: clientOptions{server: srv.URL, token: "t"}, wasm: file}
			var out bytes.Buffer
			err := runPluginUpgrade(t.Context(), o, "p", &out, io.Discard)
			if exitCode(err) != tt.code {
				t.Errorf("exit %d, want %d: %v", exitCode(err), tt.code, err)
			}
			if patches != tt.patches {
				t.Errorf("%d patches, want %d", patches, tt.patches)
			}
			if tt.code == exitOK && !strings.Contains(out.String(), "upgraded") {
				t.Errorf("output %q", out.String())
			}
			if tt.otherDigest && (digest != "sha256:other" || !strings.Contains(fmt.Sprint(err), "changed")) {
				t.Errorf("digest %s, error %v: the other upgrade must stand and be reported", digest, err)
			}
		})
	}
}
