package election_test

// Helpers: replicas (engine Services) on one real Badger store, each
// through a store wrapper that can cut it off (its calls fail, or stall
// until their context ends), as a network partition from etcd does.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Partition modes of a cutStore.
const (
	connected int32 = iota
	failing         // calls fail at once
	stalled         // calls block until their context ends
)

var errCut = errors.New("test: cut off from the store")

// cutStore is a store.Store that a test can cut off.
type cutStore struct {
	store.Store
	mode atomic.Int32
}

func (s *cutStore) cut(ctx context.Context) error {
	switch s.mode.Load() {
	case failing:
		return errCut
	case stalled:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *cutStore) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if err := s.cut(ctx); err != nil {
		return 0, err
	}
	return s.Store.Create(ctx, key, value)
}

func (s *cutStore) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	if err := s.cut(ctx); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key, opts)
}

func (s *cutStore) Update(ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	if err := s.cut(ctx); err != nil {
		return 0, err
	}
	return s.Store.Update(ctx, key, value, rev)
}

func (s *cutStore) Delete(ctx context.Context, key string, rev int64) (*store.KeyValue, int64, error) {
	if err := s.cut(ctx); err != nil {
		return nil, 0, err
	}
	return s.Store.Delete(ctx, key, rev)
}

func (s *cutStore) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	if err := s.cut(ctx); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix, opts)
}

// Close leaves the shared store open; the test closes it.
func (s *cutStore) Close() error { return nil }

// replica is one server: an engine Service on the shared store.
type replica struct {
	svc   *engine.Service
	store *cutStore
}

// newReplicas starts n engines on one Badger store in a temp dir, each
// serving Leases, and stops them at the end of the test.
func newReplicas(t *testing.T, n int) []*replica {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	stores := make([]store.Store, n)
	for i := range stores {
		stores[i] = db
	}
	return startReplicas(t, stores...)
}

// startReplicas starts a replica on each store, which the caller closes
// after the test's cleanups.
func startReplicas(t *testing.T, stores ...store.Store) []*replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	n := len(stores)
	out := make([]*replica, n)
	t.Cleanup(func() {
		cancel()
		runs.Wait()
		for _, r := range out {
			if r != nil {
				r.svc.Close()
			}
		}
	})
	for i, st := range stores {
		cs := &cutStore{Store: st}
		svc, err := engine.New(ctx, engine.Options{Store: cs, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		runs.Go(func() { _ = svc.Run(ctx) })
		out[i] = &replica{svc: svc, store: cs}
	}
	var ensure sync.WaitGroup
	errs := make([]error, n)
	for i, r := range out {
		ensure.Go(func() { errs[i] = election.EnsureKind(ctx, r.svc) })
	}
	ensure.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// Lease timings for tests: a cut-off leader stops 300 ms before another
// replica may take over.
const (
	testLeaseDuration = time.Second
	testRenewDeadline = 700 * time.Millisecond
	testRetryPeriod   = 40 * time.Millisecond
)

func short(o election.Options) election.Options {
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = testLeaseDuration, testRenewDeadline, testRetryPeriod
	return o
}

func newLeases(t *testing.T, r *replica, identity string, mod func(election.Options) election.Options) *election.Leases {
	t.Helper()
	o := election.Options{Client: r.svc, Identity: identity, Logger: quietLogger()}
	if mod != nil {
		o = mod(o)
	}
	l, err := election.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Wait)
	return l
}
