package serving

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// BenchmarkHTTP2Create times a create-shaped request (a 1 KiB body in, a
// 1 KiB body out, about 10 KiB of stack in the handler, the request
// timeout of Limit) at 64 concurrent streams over one HTTP/2 connection,
// client and server in this process, beside the same over HTTP/1.1
// (keep-alive connections), and over HTTP/2 without either of the two
// savings (no stack reserved at the top; the write deadline set and
// cleared through x/net's SetWriteDeadline), both and then each alone. It
// reports the CPU of the whole process (client and server) per request.
func BenchmarkHTTP2Create(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<10)
	deep := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := io.ReadAll(r.Body)
		if err != nil || len(in) != len(body) {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		if useStack(10) == 1 {
			b.Error("unreachable")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(in)
	})
	withInfo := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := request.WithRequestInfo(r.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: "create", Resource: "widgets"})
			next.ServeHTTP(w, r.WithContext(request.WithUser(ctx, &user.DefaultInfo{Name: "alice"})))
		})
	}
	limited := Limit(deep, LimitOptions{RequestTimeout: time.Minute}, nil)
	// The write deadline as it was set over HTTP/2 before streamCut.
	deadlines := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			deadline := time.Now().Add(time.Minute)
			ctx, cancel := context.WithDeadline(r.Context(), deadline)
			defer cancel()
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(deadline.Add(statusGrace(time.Minute)))
			defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	unlimited := Limit(deep, LimitOptions{RequestTimeout: -1}, nil)
	for _, bc := range []struct {
		name  string
		h2    bool
		serve http.Handler
	}{
		{"HTTP1.1", false, growStackHTTP2(withInfo(limited))},
		{"HTTP2", true, growStackHTTP2(withInfo(limited))},
		{"HTTP2-no-reserve", true, withInfo(limited)},
		{"HTTP2-x/net-deadline", true, growStackHTTP2(withInfo(deadlines(unlimited)))},
		{"HTTP2-before", true, withInfo(deadlines(unlimited))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(bc.serve)
			if bc.h2 {
				if err := ConfigureHTTP2(srv.Config); err != nil {
					b.Fatal(err)
				}
				srv.TLS = srv.Config.TLSConfig
			}
			srv.StartTLS()
			defer srv.Close()
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.ForceAttemptHTTP2 = bc.h2
			tr.MaxIdleConnsPerHost = 64
			if !bc.h2 {
				tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			create := func() bool {
				req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/apis/example.setpoint.dev/v1/namespaces/default/widgets", bytes.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return false
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated || (resp.ProtoMajor == 2) != bc.h2 {
					b.Errorf("%s over %s", resp.Status, resp.Proto)
					return false
				}
				return true
			}
			// Every connection made and warm before the timer starts.
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 8 {
						create()
					}
				})
			}
			wg.Wait()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && create() {
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU this process (client and server) has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
