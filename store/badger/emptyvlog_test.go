package badger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// A process killed right after Badger created its next value log, before the
// file got its header, leaves an empty .vlog file; the store still opens,
// with everything it had.
func TestOpenAfterCrashLeftAnEmptyValueLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := badger.Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	rev, err := db.Create(ctx, "/a", []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(vlogs)
	if len(vlogs) == 0 {
		t.Fatal("no value log after a write")
	}
	var last int
	fmt.Sscanf(filepath.Base(vlogs[len(vlogs)-1]), "%06d.vlog", &last)
	empty := filepath.Join(dir, fmt.Sprintf("%06d.vlog", last+1))
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = badger.Open(dir, testOptions())
	if err != nil {
		t.Fatalf("open with an empty value log: %v", err)
	}
	defer db.Close()
	kv, err := db.Get(ctx, "/a", store.GetOptions{})
	if err != nil || string(kv.Value) != `{"v":1}` || kv.ModRevision != rev {
		t.Fatalf("after reopening: %+v, %v; want /a at revision %d", kv, err, rev)
	}
	if _, err := db.Create(ctx, "/b", []byte(`{"v":2}`)); err != nil {
		t.Fatalf("write after reopening: %v", err)
	}
}
