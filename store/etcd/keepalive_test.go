package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// TestClientKeepAlive checks that the gRPC keepalive settings reach the
// etcd client's configuration, with kube-apiserver's values by default, and
// that a store opened with them works against a real etcd.
func TestClientKeepAlive(t *testing.T) {
	tests := []struct {
		name          string
		opts          etcd.Options
		time, timeout time.Duration
	}{
		{name: "defaults", time: 30 * time.Second, timeout: 10 * time.Second},
		{name: "set", opts: etcd.Options{KeepAliveTime: 12 * time.Second, KeepAliveTimeout: 3 * time.Second}, time: 12 * time.Second, timeout: 3 * time.Second},
		{name: "negative gets the default", opts: etcd.Options{KeepAliveTime: -1, KeepAliveTimeout: -1}, time: 30 * time.Second, timeout: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Endpoints = []string{"http://127.0.0.1:2379"}
			cfg := etcd.ClientConfig(tt.opts)
			if cfg.DialKeepAliveTime != tt.time || cfg.DialKeepAliveTimeout != tt.timeout {
				t.Errorf("keepalive %v / %v, want %v / %v", cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout, tt.time, tt.timeout)
			}
			if cfg.DialTimeout != 10*time.Second || len(cfg.Endpoints) != 1 {
				t.Errorf("dial timeout %v, endpoints %v: the other settings were lost", cfg.DialTimeout, cfg.Endpoints)
			}
		})
	}

	srv := etcdtest.Start(t, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1,
		KeepAliveTime: 10 * time.Second, KeepAliveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open with keepalive: %v", err)
	}
	defer db.Close()
	if _, err := db.Create(context.Background(), "/g/r/keepalive", []byte("x")); err != nil {
		t.Fatalf("Create with keepalive: %v", err)
	}
}
