package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// BenchmarkCreateHandler1KiB measures the API's create of test/bench/api's
// 1 KiB Widgets through the handler (request decoding, the engine's create
// pipeline, the durable store write and the answer), without the network,
// TLS and the serving chain in front of it.
func BenchmarkCreateHandler1KiB(b *testing.B) {
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	crdYAML, err := os.ReadFile("../../examples/widget/crd.yaml")
	if err != nil {
		b.Fatal(err)
	}
	eng, api := newTestAPI(b, db, Options{})
	// The engine's loops run, as in the server: among them the namespace
	// follower that answers creates whether their namespace is active.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	crd := httptest.NewRequest("POST", crdPath, bytes.NewReader(crdYAML))
	crd.Header.Set("Content-Type", "application/yaml")
	if w := serve(api, crd); w.Code != http.StatusCreated {
		b.Fatalf("CRD: %d %s", w.Code, w.Body)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // as many writers as the store's group commit serves at c64
	start := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := paddedWidgetJSON(fmt.Sprintf("w%07d", next.Add(1)), 1024)
			r := httptest.NewRequest("POST", widgetsPath, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json")
			if w := serve(api, r); w.Code != http.StatusCreated {
				b.Errorf("create: %d %s", w.Code, w.Body)
				return
			}
		}
	})
	b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(context.Background()))
	return w
}

// paddedWidgetJSON is test/bench/api's Widget: size bytes, padded with an
// annotation.
func paddedWidgetJSON(name string, size int) []byte {
	head := fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":%q,"annotations":{"bench.setpoint.dev/pad":"`, name)
	tail := fmt.Sprintf(`"}},"spec":{"name":%q,"size":"medium","color":"blue"}}`, name)
	return []byte(head + strings.Repeat("x", max(0, size-len(head)-len(tail))) + tail)
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
