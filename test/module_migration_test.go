package test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// moveModuleKeys moves every key under from to the same name under to, in
// the Badger store of dir, and returns how many it moved.
func moveModuleKeys(t *testing.T, dir string, moves map[string]string) int {
	t.Helper()
	ctx := context.Background()
	db, err := badger.Open(dir, badger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, FreeSpaceReserve: -1})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer db.Close()
	n := 0
	for from, to := range moves {
		res, err := db.List(ctx, from, store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range res.Items {
			if _, err := db.Create(ctx, to+strings.TrimPrefix(kv.Key, from), kv.Value); err != nil {
				t.Fatal(err)
			}
			if _, _, err := db.Delete(ctx, kv.Key, 0); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestModuleMigration starts a server on a data directory whose modules are
// where servers of earlier versions kept them (under keys shaped like
// resources of setpoint.dev): the server moves them on start, its Plugin
// loads its module again, and the module is served.
func TestModuleMigration(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	wasm := builtModule(t, "requiredlabels")
	digest := mustUpload(t, s, wasm)
	applyPlugin(t, s, pluginManifest("migrated", digest, ""))
	waitPlugin(t, s, "migrated", time.Minute, loadedWith(digest))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(s.DataDir, "store")
	toOld := map[string]string{
		store.PrivateKey("modules/"):      "/setpoint.dev/modules/",
		store.PrivateKey("modulechunks/"): "/setpoint.dev/modulechunks/",
	}
	if n := moveModuleKeys(t, dir, toOld); n < 2 {
		t.Fatalf("moved %d keys to the old layout, want the manifest and its chunks", n)
	}

	s.Restart()
	waitPlugin(t, s, "migrated", time.Minute, loadedWith(digest))
	code, body, err := s.Do("GET", modulesPath+"/"+digest, s.Token, nil)
	if err != nil || code != http.StatusOK || !bytes.Equal(body, wasm) {
		t.Fatalf("GET the migrated module: %d %v (%d bytes, want %d)", code, err, len(body), len(wasm))
	}
	if !strings.Contains(s.Logs(), "moved modules to their current keys") {
		t.Errorf("the server did not log the migration:\n%s", s.Logs())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	back := map[string]string{"/setpoint.dev/modules/": "/x/", "/setpoint.dev/modulechunks/": "/x/"}
	if n := moveModuleKeys(t, dir, back); n != 0 {
		t.Errorf("%d keys left where modules no longer live", n)
	}
}
