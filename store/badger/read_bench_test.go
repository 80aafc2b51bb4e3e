package badger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// benchReadObjects documents of about 1 KiB are listed and read back.
const benchReadObjects = 20_000

var (
	benchReadOnce sync.Once
	benchReadDir  string
)

// benchReadStore writes benchReadObjects documents once per test binary run
// into a directory shared by the read benchmarks, and closes the store so
// that they are in table files; each benchmark opens it read-write.
func benchReadStore(b *testing.B) string {
	benchReadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "setpoint-bench-read-")
		if err != nil {
			b.Fatal(err)
		}
		db, err := badger.Open(dir, badger.Options{CompactionInterval: -1, ValueLogGCInterval: -1, ScrubInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		rnd := rand.New(rand.NewPCG(1, 2))
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := g; i < benchReadObjects; i += 16 {
					v := fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, rnd.Uint64(), strings.Repeat("abcdefghij", 100))
					if _, err := db.Create(context.Background(), fmt.Sprintf("/widgets/default/w-%05d", i), v); err != nil {
						panic(err)
					}
				}
			})
		}
		wg.Wait()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		benchReadDir = dir
	})
	return benchReadDir
}

// readCases are the checksum settings compared: what the store runs with
// (every block read from a table file and every value read from the value
// log checked) and none, each with the default 64 MiB block cache, which
// holds the whole data set after the first read, and with a 1 MiB one, so
// that nearly every block is read from the file (and checked) again.
var readCases = []struct {
	name string
	opts func() badger.Options
}{
	{"checksums/cache=64MiB", func() badger.Options { return benchOpts(64 << 20) }},
	{"none/cache=64MiB", func() badger.Options { return badger.WithoutReadChecksums(benchOpts(64 << 20)) }},
	{"checksums/cache=1MiB", func() badger.Options { return benchOpts(1 << 20) }},
	{"none/cache=1MiB", func() badger.Options { return badger.WithoutReadChecksums(benchOpts(1 << 20)) }},
}

func benchOpts(cache int64) badger.Options {
	return badger.Options{CompactionInterval: -1, ValueLogGCInterval: -1, ScrubInterval: -1,
		SkipOpenVerification: true, BlockCacheSize: cache}
}

// BenchmarkListChecksums lists all benchReadObjects documents.
func BenchmarkListChecksums(b *testing.B) {
	dir := benchReadStore(b)
	for _, c := range readCases {
		b.Run(c.name, func(b *testing.B) {
			db, err := badger.Open(dir, c.opts())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				res, err := db.List(context.Background(), "/widgets/", store.ListOptions{})
				if err != nil || len(res.Items) != benchReadObjects {
					b.Fatalf("list: %d, %v", len(res.Items), err)
				}
			}
			b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkGetChecksums reads one document at a random key.
func BenchmarkGetChecksums(b *testing.B) {
	dir := benchReadStore(b)
	for _, c := range readCases {
		b.Run(c.name, func(b *testing.B) {
			db, err := badger.Open(dir, c.opts())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			rnd := rand.New(rand.NewPCG(3, 4))
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				if _, err := db.Get(context.Background(), fmt.Sprintf("/widgets/default/w-%05d", rnd.IntN(benchReadObjects)), store.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkOpenVerification opens the store with and without the check of
// every table's checksums that Open does first (ns/op is an Open and a
// Close).
func BenchmarkOpenVerification(b *testing.B) {
	dir := benchReadStore(b)
	for _, skip := range []bool{false, true} {
		b.Run(fmt.Sprintf("skip=%v", skip), func(b *testing.B) {
			opts := benchOpts(64 << 20)
			opts.SkipOpenVerification = skip
			start := processCPU()
			for b.Loop() {
				db, err := badger.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
			b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
