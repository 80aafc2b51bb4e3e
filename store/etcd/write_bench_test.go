package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// BenchmarkCreate measures Create of 1 KiB documents from 16 goroutines
// against raw etcd Puts of the same size on the same etcd, in one run (the
// ratio is the figure; these machines are noisy).
func BenchmarkCreate(b *testing.B) {
	srv := etcdtest.Start(b, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	doc := make([]byte, 1024)
	var n atomic.Int64
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := db.Create(context.Background(), fmt.Sprintf("/bench/store/%d", n.Add(1)), doc); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("raw put", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cli.Put(context.Background(), fmt.Sprintf("/bench/raw/%d", n.Add(1)), string(doc)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
