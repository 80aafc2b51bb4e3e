package bench

import (
	"context"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

func BenchmarkZZWasm(b *testing.B) {
	p := hosttest.Load(b, "widget", host.Config{Limits: host.Limits{PoolSize: 1}})
	req := request()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
