package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOpenStoreFlags: the store flags that do not go together are refused
// with a message naming the flag, before anything is opened.
func TestOpenStoreFlags(t *testing.T) {
	tests := []struct {
		name string
		e    etcdFlags
		want string
	}{
		{"unknown store", etcdFlags{kind: "bolt"}, `--store "bolt": want badger or etcd`},
		{"etcd without servers", etcdFlags{kind: "etcd", prefix: "/setpoint"}, "--store etcd needs --etcd-servers"},
		{"etcd flags on badger", etcdFlags{kind: "badger", servers: []string{"http://127.0.0.1:2379"}}, "need --store etcd"},
		{"certificate without key", etcdFlags{kind: "etcd", servers: []string{"http://127.0.0.1:1"}, certFile: "c.pem", prefix: "/setpoint"}, "go together"},
		{"relative prefix", etcdFlags{kind: "etcd", servers: []string{"http://127.0.0.1:1"}, prefix: "setpoint"}, "--etcd-prefix \"setpoint\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &serverOptions{dataDir: t.TempDir(), storeEtcd: tt.e}
			st, err := o.openStore(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			if err == nil {
				st.Close()
				t.Fatalf("openStore succeeded, want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("openStore: %v, want %q", err, tt.want)
			}
		})
	}
}
