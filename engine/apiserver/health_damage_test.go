package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestReadyzFailsOnDamagedStore damages a table file under a running
// server: the store's scrub finds it, /readyz fails, and a list answers 500
// instead of the part of the data before the damaged block.
func TestReadyzFailsOnDamagedStore(t *testing.T) {
	dir := t.TempDir()
	opts := badger.Options{MemTableSize: 1 << 20, BlockCacheSize: 1 << 20, CompactionInterval: -1, ValueLogGCInterval: -1}
	db, err := badger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		pad := make([]byte, 300)
		_, _ = rand.Read(pad)
		if _, err := db.Create(context.Background(), fmt.Sprintf("/filler/%05d", i), []byte(`{"pad":"`+hex.EncodeToString(pad)+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts.ScrubInterval = 50 * time.Millisecond
	db, err = badger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	eng, api := newTestAPI(t, db, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		db.Close()
	})
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	ts.mustDo(t, http.StatusOK, request{path: "/readyz"})
	ts.mustDo(t, http.StatusOK, request{path: "/api/v1/namespaces"})

	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files")
	}
	size := func(p string) int64 { fi, _ := os.Stat(p); return fi.Size() }
	slices.SortFunc(tables, func(a, b string) int { return int(size(b) - size(a)) })
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	_, _ = f.ReadAt(b, size(tables[0])/3)
	b[0] ^= 0xff
	_, _ = f.WriteAt(b, size(tables[0])/3)
	f.Close()

	testsupport.Poll(t, 10*time.Second, "/readyz to fail after a table file was damaged", func() (bool, string) {
		code, b, _ := ts.do(t, request{path: "/readyz"})
		return code == http.StatusInternalServerError, fmt.Sprintf("%d %s", code, b)
	})
	if b := ts.mustDo(t, http.StatusInternalServerError, request{path: "/readyz/store"}); !strings.Contains(string(b), "[-]store failed") {
		t.Errorf("/readyz/store = %q", b)
	}
	if b := ts.mustDo(t, http.StatusInternalServerError, request{path: "/api/v1/namespaces"}); !strings.Contains(string(b), "damaged data") {
		t.Errorf("list on a damaged store = %s", b)
	}
}
