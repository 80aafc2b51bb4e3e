package workqueue

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// get takes a key that must be ready without blocking.
func get(t *testing.T, q *Queue[string]) string {
	t.Helper()
	if q.Len() == 0 {
		t.Fatal("Get: no key is ready")
	}
	item, shutdown := q.Get()
	if shutdown {
		t.Fatal("Get: shutdown")
	}
	return item
}

func wantLen(t *testing.T, q *Queue[string], n int) {
	t.Helper()
	if got := q.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
}

func TestQueueSemantics(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, q *Queue[string])
	}{
		{name: "keys come out in the order they were first added", run: func(t *testing.T, q *Queue[string]) {
			for _, k := range []string{"c", "a", "b", "a", "c"} {
				q.Add(k)
			}
			var got []string
			for q.Len() > 0 {
				got = append(got, get(t, q))
			}
			if want := []string{"c", "a", "b"}; !slices.Equal(got, want) {
				t.Fatalf("order = %v, want %v", got, want)
			}
		}},
		{name: "a key added many times before Get is handed out once", run: func(t *testing.T, q *Queue[string]) {
			for range 10 {
				q.Add("a")
			}
			wantLen(t, q, 1)
			if k := get(t, q); k != "a" {
				t.Fatalf("got %q", k)
			}
			wantLen(t, q, 0)
			q.Done("a")
			wantLen(t, q, 0)
		}},
		{name: "a key re-added while held is ready only after Done", run: func(t *testing.T, q *Queue[string]) {
			q.Add("a")
			get(t, q)
			q.Add("a")
			q.Add("a")
			wantLen(t, q, 0)
			q.Done("a")
			wantLen(t, q, 1)
			get(t, q)
			q.Done("a")
			wantLen(t, q, 0)
		}},
		{name: "other keys are handed out while one is held", run: func(t *testing.T, q *Queue[string]) {
			q.Add("a")
			get(t, q)
			q.Add("a")
			q.Add("b")
			if k := get(t, q); k != "b" {
				t.Fatalf("got %q, want b", k)
			}
		}},
		{name: "Done of a key not held is a no-op", run: func(t *testing.T, q *Queue[string]) {
			q.Done("x")
			q.Add("a")
			q.Done("a")
			wantLen(t, q, 1)
		}},
		{name: "after ShutDown ready keys are still handed out, then shutdown", run: func(t *testing.T, q *Queue[string]) {
			q.Add("a")
			q.Add("b")
			q.ShutDown()
			q.Add("c")
			if !q.ShuttingDown() {
				t.Fatal("ShuttingDown = false")
			}
			get(t, q)
			get(t, q)
			if _, shutdown := q.Get(); !shutdown {
				t.Fatal("Get after drain: shutdown = false")
			}
		}},
		{name: "a key held at ShutDown and re-added is handed out after Done", run: func(t *testing.T, q *Queue[string]) {
			q.Add("a")
			get(t, q)
			q.Add("a")
			q.ShutDown()
			q.Done("a")
			if k := get(t, q); k != "a" {
				t.Fatalf("got %q", k)
			}
		}},
		{name: "AddAfter and AddRateLimited after ShutDown are ignored", run: func(t *testing.T, q *Queue[string]) {
			q.ShutDown()
			q.AddAfter("a", 0)
			q.AddAfter("b", time.Second)
			q.AddRateLimited("c")
			wantLen(t, q, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, New(Options[string]{}))
		})
	}
}

func TestGetBlocksUntilAddOrShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		got := make(chan string, 1)
		go func() {
			k, shutdown := q.Get()
			if shutdown {
				k = "<shutdown>"
			}
			got <- k
		}()
		synctest.Wait()
		select {
		case k := <-got:
			t.Fatalf("Get returned %q on an empty queue", k)
		default:
		}
		q.Add("a")
		if k := <-got; k != "a" {
			t.Fatalf("Get = %q, want a", k)
		}
		go func() {
			_, shutdown := q.Get()
			if shutdown {
				got <- "<shutdown>"
			}
		}()
		synctest.Wait()
		q.ShutDown()
		if k := <-got; k != "<shutdown>" {
			t.Fatalf("Get = %q, want shutdown", k)
		}
	})
}

func TestShutDownWithDrainWaitsForHeldKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		q.Add("b")
		k := get(t, q)
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait()
		// "b" is still ready: a worker may take it during the drain.
		k2 := get(t, q)
		q.Done(k)
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while a key was held")
		default:
		}
		q.Done(k2)
		<-drained
		if _, shutdown := q.Get(); !shutdown {
			t.Fatal("Get after drain: shutdown = false")
		}
	})
}

func TestShutDownCancelsDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		q.Add("a")
		get(t, q)
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait()
		q.ShutDown()
		<-drained
	})
}

func TestAddAfter(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration // AddAfter("a", d) for each, in order
		ready  time.Duration   // when "a" must become ready
	}{
		{name: "zero delay adds now", delays: []time.Duration{0}, ready: 0},
		{name: "negative delay adds now", delays: []time.Duration{-time.Second}, ready: 0},
		{name: "one delay", delays: []time.Duration{time.Second}, ready: time.Second},
		{name: "an earlier delay wins over a later one", delays: []time.Duration{10 * time.Second, time.Second}, ready: time.Second},
		{name: "a later delay does not postpone", delays: []time.Duration{time.Second, 10 * time.Second}, ready: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := New(Options[string]{})
				defer q.ShutDown()
				for _, d := range tt.delays {
					q.AddAfter("a", d)
				}
				if tt.ready > 0 {
					time.Sleep(tt.ready - time.Nanosecond)
					synctest.Wait()
					wantLen(t, q, 0)
					time.Sleep(time.Nanosecond)
					synctest.Wait()
				}
				wantLen(t, q, 1)
				get(t, q)
				q.Done("a")
				time.Sleep(time.Hour)
				synctest.Wait()
				wantLen(t, q, 0) // handed out once, not once per AddAfter
			})
		})
	}
}

func TestAddAfterManyKeysReleasedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		defer q.ShutDown()
		q.AddAfter("c", 3*time.Second)
		q.AddAfter("a", 1*time.Second)
		q.AddAfter("b", 2*time.Second)
		q.Add("now")
		var got []string
		for range 4 {
			k, _ := q.Get()
			got = append(got, k)
			q.Done(k)
		}
		if want := []string{"now", "a", "b", "c"}; !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
		if elapsed := time.Since(time.Unix(946684800, 0)); elapsed != 3*time.Second {
			t.Fatalf("elapsed = %v, want 3s", elapsed) // synctest starts at 2000-01-01
		}
	})
}

func TestAddRateLimitedBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		defer q.ShutDown()
		// Each failure doubles the wait: 5, 10, 20, 40, 80 ms.
		for i := range 5 {
			want := DefaultBaseDelay << i
			start := time.Now()
			q.AddRateLimited("a")
			if n := q.NumRequeues("a"); n != i+1 {
				t.Fatalf("NumRequeues = %d, want %d", n, i+1)
			}
			k, _ := q.Get()
			if waited := time.Since(start); waited != want {
				t.Fatalf("retry %d waited %v, want %v", i+1, waited, want)
			}
			q.Done(k)
		}
		q.Forget("a")
		if n := q.NumRequeues("a"); n != 0 {
			t.Fatalf("NumRequeues after Forget = %d", n)
		}
		start := time.Now()
		q.AddRateLimited("a")
		q.Get()
		if waited := time.Since(start); waited != DefaultBaseDelay {
			t.Fatalf("after Forget waited %v, want %v", waited, DefaultBaseDelay)
		}
	})
}

// TestHammer runs many producers and workers on few keys and checks that no
// two workers ever hold one key, that every Add is followed by a processing
// that started after it, and that duplicates are collapsed.
func TestHammer(t *testing.T) {
	const (
		producers = 8
		workers   = 6
		adds      = 400
		keys      = 32
	)
	q := New(Options[int]{})
	var (
		mu        sync.Mutex
		held      = make(map[int]bool)
		seq       int64
		lastAdd   [keys]int64
		lastStart [keys]int64
		processed int
		reAdds    int
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if held[k] {
					t.Errorf("worker %d: key %d already held by another worker", w, k)
				}
				held[k] = true
				seq++
				lastStart[k] = seq
				processed++
				mu.Unlock()
				if k%3 == 0 {
					mu.Lock()
					reAdds++
					mu.Unlock()
					q.Add(k) // re-added while held
				}
				mu.Lock()
				held[k] = false
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	var pg sync.WaitGroup
	for p := range producers {
		pg.Go(func() {
			for i := range adds {
				k := (p*7 + i*13) % keys
				mu.Lock()
				seq++
				lastAdd[k] = seq
				mu.Unlock()
				q.Add(k)
			}
		})
	}
	pg.Wait()
	q.ShutDownWithDrain()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		if lastAdd[k] != 0 && lastStart[k] < lastAdd[k] {
			t.Errorf("key %d: last added at %d, last processing started at %d", k, lastAdd[k], lastStart[k])
		}
	}
	if processed == 0 || processed > producers*adds+reAdds {
		t.Errorf("processed %d times for %d adds", processed, producers*adds+reAdds)
	}
	if q.Len() != 0 {
		t.Errorf("Len after drain = %d", q.Len())
	}
}

// TestHammerWithFailures has workers fail keys at random and retry them with
// backoff, in fake time, and checks every key ends up processed successfully.
func TestHammerWithFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, keys = 4, 50
		q := New(Options[int]{RateLimiter: MaxOf(NewExponential[int](time.Millisecond, time.Second), NewBucket[int](100, 10))})
		var (
			mu   sync.Mutex
			held = make(map[int]bool)
			ok   = make(map[int]bool)
		)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					k, shutdown := q.Get()
					if shutdown {
						return
					}
					mu.Lock()
					if held[k] {
						t.Errorf("key %d held twice", k)
					}
					held[k] = true
					mu.Unlock()
					time.Sleep(time.Millisecond) // work, in fake time
					mu.Lock()
					held[k] = false
					// Fail the first three attempts of every key.
					fail := q.NumRequeues(k) < 3
					if !fail {
						ok[k] = true
					}
					mu.Unlock()
					if fail {
						q.AddRateLimited(k)
					} else {
						q.Forget(k)
					}
					q.Done(k)
				}
			})
		}
		for k := range keys {
			q.Add(k)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		q.ShutDownWithDrain()
		wg.Wait()
		if len(ok) != keys {
			t.Fatalf("%d of %d keys succeeded", len(ok), keys)
		}
		for k := range keys {
			if n := q.NumRequeues(k); n != 0 {
				t.Errorf("key %d: NumRequeues = %d after Forget", k, n)
			}
		}
	})
}
