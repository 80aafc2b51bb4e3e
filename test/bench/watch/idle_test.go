package watch

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
)

// BenchmarkIdleWebSocketWatchers opens IDLE_WATCHERS (10,000 by default)
// idle WebSocket watches on a server of their own and reports the server's
// heap and goroutine stacks per watch (see idleMemory). With
// HEAP_PROFILE=prefix it saves the server's heap and goroutine profiles,
// with the watches open, as prefix.heap and prefix.goroutine.
func BenchmarkIdleWebSocketWatchers(b *testing.B) {
	n := benchtest.Env("IDLE_WATCHERS", 10000)
	b.Logf("load average %s", benchtest.LoadAvg())
	for i := 0; i < b.N; i++ {
		per := idleMemory(b, n, func(x *bench) {
			prefix := os.Getenv("HEAP_PROFILE")
			if prefix == "" {
				return
			}
			for _, p := range []string{"heap", "goroutine"} {
				if err := os.WriteFile(prefix+"."+p, x.get("/debug/pprof/"+p), 0o644); err != nil {
					b.Errorf("save %s profile: %v", p, err)
				}
			}
		})
		b.ReportMetric(per, "server-bytes/idle-watcher")
		b.ReportMetric(per*float64(n)/(1<<20), fmt.Sprintf("server-MiB/%d-idle-watchers", n))
	}
}

// get reads path with the admin token.
func (x *bench) get(path string) []byte {
	req, _ := http.NewRequest("GET", x.s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+x.s.Token)
	resp, err := x.client.Do(req)
	if err != nil {
		x.b.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		x.b.Fatalf("GET %s: %d %.200s", path, resp.StatusCode, body)
	}
	return body
}
