package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// ErrRunning is returned by Run while another Run of the Service runs.
var ErrRunning = errors.New("engine: the service is running already")

// Run runs the engine's background loops, the CRD follower and the
// namespace follower (followNamespaces), until ctx is done, and returns
// after they have stopped. One Run at a time: a second one
// while the first runs returns ErrRunning at once; after it returns, the
// Service may Run again.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	// Saves of read-schema records still waiting are dropped when Run
	// returns (the records keep the conservative revision): the store may
	// be closed next.
	defer s.delayed.stop()
	var followers sync.WaitGroup
	defer followers.Wait()
	followers.Go(func() { s.followNamespaces(ctx) })
	s.followCRDs(ctx)
	return nil
}

// Close stops the work the Service still has pending outside Run (delayed
// saves of CRDs' read-schema records) and waits for what is running, so
// that the store can be closed after it; later writes schedule none. Close
// is idempotent; it does not stop a Run, whose context does.
func (s *Service) Close() error {
	s.delayed.close()
	return nil
}

var crdPrefix = store.ResourcePrefix(kinds.CRDResource.Group, kinds.CRDResource.Resource, "")

// loadCRDs serves every stored CRD and returns the revision it read at.
func (s *Service) loadCRDs(ctx context.Context) (int64, error) {
	seen := map[string]bool{}
	rev, err := store.ListPages(ctx, s.store, crdPrefix, store.ListOptions{Limit: 500}, func(items []store.KeyValue) error {
		for _, kv := range items {
			u, err := kinds.DecodeMap(kv.Value)
			if err != nil {
				s.log.Error("decode stored CustomResourceDefinition", "key", kv.Key, "err", err)
				continue
			}
			seen[(&unstructured.Unstructured{Object: u}).GetName()] = true
			s.serveCRD(ctx, u, kv.ModRevision)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, c := range s.reg.CRDs() {
		if !seen[c.Name] {
			s.reg.RemoveCRD(c.Name, rev)
		}
	}
	return rev, nil
}

// followCRDs keeps the registry in step with CRD writes made by anyone, so
// that several replicas on one store serve the same kinds.
func (s *Service) followCRDs(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := s.loadCRDs(ctx)
		if err == nil {
			err = s.watchCRDs(ctx, rev)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("crd follower restarts", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Service) watchCRDs(ctx context.Context, rev int64) error {
	w, err := storeWatch(ctx, s.store, crdPrefix, rev)
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.Events() {
		u, err := kinds.DecodeMap(ev.Object.Value)
		if err != nil {
			continue
		}
		if ev.Type == store.Deleted {
			s.reg.RemoveCRD((&unstructured.Unstructured{Object: u}).GetName(), ev.Revision())
			continue
		}
		s.serveCRD(ctx, u, ev.Revision())
	}
	if err := w.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
		return err
	}
	return nil
}
