package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/snapshot"
)

// writeSnapshot writes a snapshot of two keys at revision 7 to a file and
// returns its path.
func writeSnapshot(t *testing.T) string {
	t.Helper()
	kvs := []*store.KeyValue{
		{Key: "/core/namespaces/a", Value: []byte(`{"kind":"Namespace"}`), CreateRevision: 3, ModRevision: 5},
		{Key: "/core/namespaces/b", Value: []byte(`{"kind":"Namespace"}`), CreateRevision: 7, ModRevision: 7},
	}
	var buf bytes.Buffer
	w, err := snapshot.NewWriter(&buf, snapshot.Header{Revision: 7, Time: time.Now(), Keys: int64(len(kvs)), Counts: map[string]int64{"core/namespaces": 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if err := w.Write(kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "whole.snap")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestSnapshotRestoreRefusesDamaged: both restores verify the whole file
// before they write anything, and name the file; a whole file restores.
func TestSnapshotRestoreRefusesDamaged(t *testing.T) {
	whole := writeSnapshot(t)
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.snap")
	if err := os.WriteFile(damaged, b[:len(b)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "restored")
	tests := []struct {
		name    string
		restore func(file string) error
	}{
		{"badger", func(file string) error {
			return runSnapshotRestore(&snapshotRestoreOptions{dataDir: dataDir, etcd: etcdFlags{kind: "badger"}}, file, &bytes.Buffer{})
		}},
		// Nothing listens on port 1: a restore that got past the file would fail
		// on the connection, with another error.
		{"etcd", func(file string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return runSnapshotRestoreEtcd(ctx, &snapshotRestoreOptions{etcd: etcdFlags{kind: "etcd", servers: []string{"http://127.0.0.1:1"}, prefix: "/restored"}}, file, &bytes.Buffer{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.restore(damaged)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), damaged) {
				t.Fatalf("restore of a damaged file: %v, want %v naming the file", err, snapshot.ErrCorrupt)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("restore of a damaged file left %s behind: %v", dataDir, err)
			}
		})
	}
	var out bytes.Buffer
	if err := runSnapshotRestore(&snapshotRestoreOptions{dataDir: dataDir, etcd: etcdFlags{kind: "badger"}}, whole, &out); err != nil {
		t.Fatalf("restore of a whole file: %v", err)
	}
	if !strings.Contains(out.String(), "revision 7, 2 keys") {
		t.Errorf("restore printed %q", out.String())
	}
}
