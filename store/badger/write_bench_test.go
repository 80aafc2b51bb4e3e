package badger_test

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// BenchmarkUpdate1KiB measures one durable 1 KiB update from a single
// writer (a group of one), with the process's CPU per update, which is what
// a converge pays per status write in the store.
func BenchmarkUpdate1KiB(b *testing.B) {
	ctx := context.Background()
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := bytes.Repeat([]byte("x"), 1024)
	rev, err := db.Create(ctx, "/widgets/default/w", value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := processCPU()
	for b.Loop() {
		if rev, err = db.Update(ctx, "/widgets/default/w", value, rev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
