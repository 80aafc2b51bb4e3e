package workqueue

import (
	"strconv"
	"sync/atomic"
	"testing"
)

func BenchmarkAddGetDone(b *testing.B) {
	q := New(Options[int]{})
	defer q.ShutDown()
	b.ReportAllocs()
	for i := range b.N {
		q.Add(i & 1023)
		k, _ := q.Get()
		q.Done(k)
	}
}

func BenchmarkAddDuplicate(b *testing.B) {
	q := New(Options[string]{})
	defer q.ShutDown()
	q.Add("default/widget-1")
	b.ReportAllocs()
	for range b.N {
		q.Add("default/widget-1")
	}
}

func BenchmarkAddRateLimited(b *testing.B) {
	q := New(Options[string]{RateLimiter: NewExponential[string](0, 0)})
	defer q.ShutDown()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "default/widget-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := range b.N {
		k := keys[i&1023]
		q.AddRateLimited(k)
		got, _ := q.Get()
		q.Forget(got)
		q.Done(got)
	}
}

func BenchmarkParallel(b *testing.B) {
	q := New(Options[int]{})
	defer q.ShutDown()
	b.ReportAllocs()
	// Keys are unique so that every Add makes one ready key and no Get waits
	// forever.
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			q.Add(int(next.Add(1)))
			if k, shutdown := q.Get(); !shutdown {
				q.Done(k)
			}
		}
	})
}
