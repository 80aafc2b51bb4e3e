package controller

import (
	"context"
	"log/slog"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sharedInformers hands out one informer per client, resource and
// namespace to the controllers that use it, so that two controllers of the
// same kind keep one cache and one watch of it. An informer starts with its
// first user and stops when the last one releases it. A Manager keeps one
// for the controllers it runs while leading; a Controller run on its own
// keeps a private one.
//
// Threads: one goroutine per informer, started by acquire and stopped (and
// waited for) by the release of its last user.
type sharedInformers struct {
	log *slog.Logger

	// mu guards m.
	mu sync.Mutex
	m  map[informerKey]*sharedInformer
}

// informerKey identifies a shareable informer. Clients are compared as
// interface values, so only pointer clients share (the engine's Service is
// one): comparing others could panic or tell copies apart.
type informerKey struct {
	client    Reader
	resource  schema.GroupVersionResource
	namespace string
}

// sharedInformer is an informer with its users.
type sharedInformer struct {
	*informer
	key    informerKey
	shared bool // in the map; false for a client that cannot be a map key
	refs   int  // guarded by sharedInformers.mu
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
}

func newSharedInformers(log *slog.Logger) *sharedInformers {
	return &sharedInformers{log: log, m: make(map[informerKey]*sharedInformer)}
}

// acquire returns the informer of kind in namespace through client,
// starting it if nobody uses it. The informer's calls carry ctx's values
// but not its cancellation: it runs until its last user releases it.
func (s *sharedInformers) acquire(ctx context.Context, kind Kind, client Reader, namespace string) *sharedInformer {
	key := informerKey{client: client, resource: kind.Resource, namespace: namespace}
	shared := shareable(client)
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared {
		if si := s.m[key]; si != nil {
			si.refs++
			return si
		}
	}
	ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	si := &sharedInformer{
		informer: newInformer(kind, client, namespace, s.log),
		key:      key,
		shared:   shared,
		refs:     1,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	if shared {
		s.m[key] = si
	}
	go func() {
		defer close(si.done)
		si.run(ictx)
	}()
	return si
}

// release gives si back; the last release stops the informer and waits for
// its goroutine.
func (s *sharedInformers) release(si *sharedInformer) {
	s.mu.Lock()
	si.refs--
	last := si.refs == 0
	if last && si.shared && s.m[si.key] == si {
		delete(s.m, si.key)
	}
	s.mu.Unlock()
	if last {
		si.cancel()
		<-si.done
	}
}

// hold acquires the running informers c uses, so that they outlive c's
// run: the Manager holds them across a hot swap, so that the new controller
// finds them cached instead of listing again. It starts none. Release them
// with releaseAll.
func (s *sharedInformers) hold(c *Controller) []*sharedInformer {
	if !shareable(c.opts.Client) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sharedInformer
	for _, k := range c.kinds() {
		if si := s.m[informerKey{client: c.opts.Client, resource: k.Resource, namespace: c.opts.Namespace}]; si != nil {
			si.refs++
			out = append(out, si)
		}
	}
	return out
}

func (s *sharedInformers) releaseAll(sis []*sharedInformer) {
	for _, si := range sis {
		s.release(si)
	}
}

// shareable reports whether informers of client may be shared.
func shareable(client Reader) bool {
	return reflect.TypeOf(client).Kind() == reflect.Pointer
}
