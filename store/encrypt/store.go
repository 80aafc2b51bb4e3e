package encrypt

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/setpoint-dev/setpoint/store"
)

// Store is a store.Store whose documents of the configured resources are
// transformed (encrypted) in the backend it wraps.
type Store struct {
	inner store.Store
	cfg   *Config

	mu sync.Mutex
	// stale holds, by key, the revision of a document last read through a
	// provider that no longer writes (a key rotated out of first place),
	// until the document is written again; guarded by mu.
	stale map[string]int64
}

var _ store.Store = (*Store)(nil)

// New wraps inner so that the resources cfg names are stored as its first
// provider writes them. Closing the Store closes inner.
func New(inner store.Store, cfg *Config) *Store {
	return &Store{inner: inner, cfg: cfg, stale: map[string]int64{}}
}

// transformerForKey returns the transformer of the resource key belongs
// to, nil for a key outside the configured resources or a private record.
func (s *Store) transformerForKey(key string) value.Transformer {
	gr, ok := resourceOf(key)
	if !ok {
		return nil
	}
	return s.cfg.transformer(gr)
}

// resourceOf parses the group and resource of a resource key or of a
// prefix that names both ("/core/secrets/", "/apps/deployments/ns/name").
func resourceOf(key string) (schema.GroupResource, bool) {
	if store.IsPrivate(key) || !strings.HasPrefix(key, "/") {
		return schema.GroupResource{}, false
	}
	group, rest, ok := strings.Cut(key[1:], "/")
	if !ok {
		return schema.GroupResource{}, false
	}
	resource, _, ok := strings.Cut(rest, "/")
	if !ok || resource == "" || group == "" {
		return schema.GroupResource{}, false
	}
	if group == store.CoreGroup {
		group = ""
	}
	return schema.GroupResource{Group: group, Resource: resource}, true
}

// touches reports whether some key under prefix may be transformed.
func (s *Store) touches(prefix string) bool {
	if store.IsPrivate(prefix) {
		return false
	}
	if gr, ok := resourceOf(prefix); ok {
		return s.cfg.transformer(gr) != nil
	}
	return len(s.cfg.transformers) > 0 // a prefix above a resource
}

// encrypt is the stored form of value under key.
func (s *Store) encrypt(ctx context.Context, key string, v []byte) ([]byte, error) {
	t := s.transformerForKey(key)
	if t == nil {
		return v, nil
	}
	out, err := t.TransformToStorage(ctx, v, value.DefaultContext(key))
	if err != nil {
		return nil, fmt.Errorf("encrypt: %s: %v", key, err)
	}
	return out, nil
}

// decrypt is kv with the plaintext of its value, and records a stale
// read. kv is not changed: the backend may share it (with its watchers).
func (s *Store) decrypt(ctx context.Context, kv *store.KeyValue) (*store.KeyValue, error) {
	t := s.transformerForKey(kv.Key)
	if t == nil || kv.Value == nil {
		return kv, nil
	}
	out, stale, err := t.TransformFromStorage(ctx, kv.Value, value.DefaultContext(kv.Key))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDecrypt, kv.Key, err)
	}
	if stale {
		s.mu.Lock()
		s.stale[kv.Key] = kv.ModRevision
		s.mu.Unlock()
	}
	c := *kv
	c.Value = out
	return &c, nil
}

// written forgets that key was read stale.
func (s *Store) written(key string) {
	s.mu.Lock()
	delete(s.stale, key)
	s.mu.Unlock()
}

// Stale reports whether the document under key at revision rev was read
// through a provider that no longer writes (its key was rotated out of
// first place), so that writing it unchanged still re-encrypts it: what
// `kubectl get secrets -A -o json | kubectl replace -f -` relies on.
func (s *Store) Stale(key string, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.stale[key]
	return ok && r == rev
}

func (s *Store) Create(ctx context.Context, key string, v []byte) (int64, error) {
	b, err := s.encrypt(ctx, key, v)
	if err != nil {
		return 0, err
	}
	return s.inner.Create(ctx, key, b)
}

func (s *Store) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	kv, err := s.inner.Get(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return s.decrypt(ctx, kv)
}

func (s *Store) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	if opts.KeysOnly || !s.touches(prefix) {
		return s.inner.List(ctx, prefix, opts)
	}
	// The filter sees plaintext; what it accepts is not decrypted twice.
	var (
		plain map[string][]byte
		ferr  error
	)
	if f := opts.Filter; f != nil {
		plain = map[string][]byte{}
		opts.Filter = func(key string, v []byte) bool {
			if ferr != nil {
				return false
			}
			if s.transformerForKey(key) == nil {
				return f(key, v)
			}
			kv, err := s.decrypt(ctx, &store.KeyValue{Key: key, Value: v})
			if err != nil {
				ferr = err
				return false
			}
			if !f(key, kv.Value) {
				return false
			}
			plain[key] = kv.Value
			return true
		}
	}
	res, err := s.inner.List(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	if ferr != nil {
		return nil, ferr
	}
	out := *res
	out.Items = make([]store.KeyValue, len(res.Items))
	for i := range res.Items {
		it := res.Items[i]
		if p, ok := plain[it.Key]; ok {
			it.Value = p
		} else if kv, err := s.decrypt(ctx, &it); err != nil {
			return nil, err
		} else {
			it = *kv
		}
		out.Items[i] = it
	}
	return &out, nil
}

func (s *Store) Update(ctx context.Context, key string, v []byte, expectedRevision int64) (int64, error) {
	b, err := s.encrypt(ctx, key, v)
	if err != nil {
		return 0, err
	}
	rev, err := s.inner.Update(ctx, key, b, expectedRevision)
	if err == nil {
		s.written(key)
	}
	return rev, err
}

func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (*store.KeyValue, int64, error) {
	kv, rev, err := s.inner.Delete(ctx, key, expectedRevision)
	if err != nil {
		return kv, rev, err
	}
	s.written(key)
	kv, err = s.decrypt(ctx, kv)
	return kv, rev, err
}

func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (store.Watcher, error) {
	w, err := s.inner.Watch(ctx, prefix, fromRevision)
	if err != nil || !s.touches(prefix) {
		return w, err
	}
	return newRelay(ctx, s, w), nil
}

func (s *Store) Compact(ctx context.Context, revision int64) error {
	return s.inner.Compact(ctx, revision)
}

func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	return s.inner.CurrentRevision(ctx)
}

func (s *Store) Close() error { return s.inner.Close() }

// Health is the wrapped store's, when it tells.
func (s *Store) Health() error {
	if h, ok := s.inner.(interface{ Health() error }); ok {
		return h.Health()
	}
	return nil
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() store.Store { return s.inner }
