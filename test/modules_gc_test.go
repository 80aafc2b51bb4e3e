package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestModulesGC runs the module garbage collector with a short grace
// period: a module no Plugin uses disappears from the module list, with
// its cached instrumented form; the module a Plugin uses stays and cannot
// be deleted; a deleted module uploads again as new.
func TestModulesGC(t *testing.T) {
	// Its own compile cache: the test looks for the module's entry there.
	s := testserver.Start(t, testserver.Options{Args: []string{"--module-gc-grace", "1s"}, OwnPluginCache: true})
	used := builtModule(t, "requiredlabels")
	unused := withCustomSection(used, "setpoint-test-gc")
	usedDigest, unusedDigest := digestOfModule(used), digestOfModule(unused)

	// The Plugin comes first, so that its module is never unused.
	applyPlugin(t, s, pluginManifest("gc-user", usedDigest, ""))
	if d := mustUpload(t, s, used); d != usedDigest {
		t.Fatalf("uploaded %s, want %s", d, usedDigest)
	}
	if d := mustUpload(t, s, unused); d != unusedDigest {
		t.Fatalf("uploaded %s, want %s", d, unusedDigest)
	}
	waitPlugin(t, s, "gc-user", time.Minute, loadedWith(usedDigest))
	cached, _ := filepath.Glob(filepath.Join(s.DataDir, "wasm-cache", "instrumented", "*-"+strings.TrimPrefix(unusedDigest, "sha256:")+".wasm"))

	type moduleList struct {
		Kind  string
		Items []gcModule
	}
	list := func() moduleList {
		t.Helper()
		code, body, err := s.Do("GET", modulesPath, s.Token, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", modulesPath, code, err, body)
		}
		var l moduleList
		if err := json.Unmarshal(body, &l); err != nil || l.Kind != "ModuleList" {
			t.Fatalf("GET %s: %v %s", modulesPath, err, body)
		}
		return l
	}
	// The collector deletes a module in steps: it removes it from the store
	// (the list stops showing it), lists the Plugins again to restore it if
	// one began to use it meanwhile, and only then drops its instrumented
	// form and logs "module deleted". Wait for that last step; by then the
	// list must not show the module and its cache entry must be gone.
	testsupport.Poll(t, 30*time.Second, "the unused module deleted", func() (bool, string) {
		return deletionLogged(s.Logs(), unusedDigest), "no \"module deleted\" log line for " + unusedDigest
	})
	if l := list(); len(l.Items) != 1 || l.Items[0].Digest != usedDigest || l.Items[0].Size != len(used) || !slices.Equal(l.Items[0].UsedBy, []string{"gc-user"}) {
		t.Fatalf("modules = %+v, want only %s (%d bytes) used by gc-user", l, usedDigest, len(used))
	}
	if len(cached) == 0 {
		t.Errorf("no instrumented cache entry for %s after its upload", unusedDigest)
	}
	for _, f := range cached {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the instrumented cache entry %s outlived its module: %v", f, err)
		}
	}

	if code, body, _ := s.Do("DELETE", modulesPath+"/"+usedDigest, s.Token, nil); code != http.StatusConflict || !strings.Contains(string(body), "gc-user") {
		t.Errorf("DELETE a used module: %d %s", code, body)
	}
	if code, body, _ := s.Do("DELETE", modulesPath+"/"+unusedDigest, s.Token, nil); code != http.StatusNotFound {
		t.Errorf("DELETE a deleted module: %d %s", code, body)
	}
	if r := upload(t, s, unused, "", "application/wasm"); r.code != http.StatusCreated {
		t.Errorf("upload a deleted module again: %d %s", r.code, r.msg)
	}
	if code, _, _ := s.Do("GET", modulesPath+"/"+usedDigest, s.Token, nil); code != http.StatusOK {
		t.Errorf("GET the used module: %d", code)
	}
}

// gcModule is an item of the module list.
type gcModule struct {
	Digest string
	Size   int
	UsedBy []string
}

// deletionLogged reports whether logs has the collector's "module deleted"
// line for digest.
func deletionLogged(logs, digest string) bool {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `msg="module deleted"`) && strings.Contains(line, "digest="+digest) {
			return true
		}
	}
	return false
}

func digestOfModule(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}
