package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
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

// TestOpenStoreEtcdTLS: --etcd-cafile, --etcd-certfile and --etcd-keyfile
// reach an etcd that requires client certificates (store/etcd's TestTLS
// shows it refuses a client without one).
func TestOpenStoreEtcdTLS(t *testing.T) {
	e := etcdtest.Start(t, etcdtest.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flags := etcdFlags{kind: "etcd", servers: []string{e.Endpoint}, prefix: "/tls",
		caFile: e.TLS.CAFile, certFile: e.TLS.CertFile, keyFile: e.TLS.KeyFile}
	o := &serverOptions{dataDir: t.TempDir(), storeEtcd: flags, historyCompactionInterval: time.Minute}
	st, err := o.openStore(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("openStore over TLS: %v", err)
	}
	rev, err := st.Create(ctx, "/g/r/x", []byte("x"))
	if err != nil {
		t.Errorf("Create over TLS: %v", err)
	}
	if kv, err := st.Get(ctx, "/g/r/x", store.GetOptions{}); err != nil || kv.ModRevision != rev {
		t.Errorf("Get over TLS: %v, %+v", err, kv)
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
}
