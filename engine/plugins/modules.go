package plugins

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/setpoint-dev/setpoint/store"
)

// Modules is the content-addressed module store: module bytes kept in the
// object store under their sha256 digest, in chunks (modulechunks.go), so a
// restart needs nothing else and no store value is over etcd's limit.
// It is safe for concurrent use.
//
// Modules are removed only by the ModuleGC. To keep an upload from being
// undone by a deletion decided before it, every upload marks its digest
// (Put, Touch) and a deletion names the mark it decided on: the mark and
// the delete are serialized by mu, so a module uploaded again after the
// decision is kept.
type Modules struct {
	st store.Store

	mu    sync.Mutex // guards seq and marks; held across a delete's check and write
	seq   uint64
	marks map[string]uint64 // digest → seq of its last upload in this process
}

// NewModules returns the module store over st.
func NewModules(st store.Store) *Modules { return &Modules{st: st, marks: map[string]uint64{}} }

func moduleKey(digest string) string { return modulesAt.key(digest) }

// Put stores wasm under digest, which the caller computed from wasm, in
// chunks (see modulechunks.go). It reports whether the module was new;
// storing a module again is a no-op.
func (m *Modules) Put(ctx context.Context, digest string, wasm []byte) (created bool, err error) {
	m.touch(digest)
	if _, err := m.st.Get(ctx, moduleKey(digest), store.GetOptions{}); err == nil {
		return false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("plugins: store module %s: %w", digest, err)
	}
	created, err = writeChunked(ctx, m.st, digest, wasm)
	if err != nil {
		return false, fmt.Errorf("plugins: store module %s: %w", digest, err)
	}
	return created, nil
}

// Touch reports whether digest is stored and, when it is, counts as an
// upload of it: the garbage collector's grace period starts again.
func (m *Modules) Touch(ctx context.Context, digest string) (bool, error) {
	m.touch(digest)
	if _, err := m.Get(ctx, digest); err != nil {
		if errors.Is(err, ErrModuleNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// touch marks an upload of digest. It comes before the store is read or
// written, so a delete either sees the mark or finishes before the upload
// looks.
func (m *Modules) touch(digest string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.marks[digest] = m.seq
}

// mark returns the mark of digest's last upload in this process, 0 when
// there was none.
func (m *Modules) mark(digest string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[digest]
}

// Get returns the module stored under digest after checking it against
// the digest: ErrModuleNotFound, or ErrModuleCorrupt when chunks are
// missing or the bytes do not match.
func (m *Modules) Get(ctx context.Context, digest string) ([]byte, error) {
	wasm, err := readModule(ctx, m.st, digest)
	if err != nil {
		if errors.Is(err, ErrModuleNotFound) || errors.Is(err, ErrModuleCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("plugins: read module %s: %w", digest, err)
	}
	return wasm, nil
}

// StoredModule is a module in the store.
type StoredModule struct {
	Digest string
	Size   int
}

// List returns the stored modules by digest, sized from their manifests
// (a module stored whole by an earlier version is read to size it; none is
// kept).
func (m *Modules) List(ctx context.Context) ([]StoredModule, error) {
	var out []StoredModule
	opts := store.ListOptions{Filter: func(key string, value []byte) bool {
		size := len(value)
		if man, ok := parseManifest(value); ok {
			size = man.Size
		}
		out = append(out, StoredModule{Digest: modulesAt.digestOf(key), Size: size})
		return false
	}}
	if _, err := store.ListPages(ctx, m.st, modulesAt.modules, opts, nil); err != nil {
		return nil, fmt.Errorf("plugins: list modules: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

// Digests returns the digests of the stored modules, in order, without
// reading their bytes.
func (m *Modules) Digests(ctx context.Context) ([]string, error) {
	var out []string
	_, err := store.ListPages(ctx, m.st, modulesAt.modules, store.ListOptions{KeysOnly: true}, func(items []store.KeyValue) error {
		for _, kv := range items {
			out = append(out, modulesAt.digestOf(kv.Key))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("plugins: list modules: %w", err)
	}
	return out, nil
}

// errUploadedAgain: the module was uploaded again after the deletion was
// decided; it is kept.
var errUploadedAgain = errors.New("plugins: module uploaded again")

// removedModule is a module as it was before remove deleted it.
type removedModule struct {
	digest string
	size   int
	wasm   []byte // nil when it could not be read back intact
}

// remove deletes digest, its manifest first and then its chunks, unless it
// was uploaded again since its upload mark was mark (errUploadedAgain). It
// returns the module as it was, so that a caller who finds it still in use
// can restore it. A corrupt module is deleted too; it cannot be restored.
func (m *Modules) remove(ctx context.Context, digest string, mark uint64) (*removedModule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks[digest] != mark {
		return nil, errUploadedAgain
	}
	wasm, err := readModule(ctx, m.st, digest)
	switch {
	case errors.Is(err, ErrModuleNotFound):
		return nil, err
	case errors.Is(err, ErrModuleCorrupt):
		wasm = nil
	case err != nil:
		return nil, fmt.Errorf("plugins: delete module %s: %w", digest, err)
	}
	kv, _, err := m.st.Delete(ctx, moduleKey(digest), 0)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrModuleNotFound, digest)
		}
		return nil, fmt.Errorf("plugins: delete module %s: %w", digest, err)
	}
	delete(m.marks, digest)
	size := len(kv.Value)
	if man, ok := parseManifest(kv.Value); ok {
		size = man.Size
	}
	if err := deleteChunks(ctx, m.st, digest); err != nil {
		// The manifest is gone: what is left are orphans for the GC.
		return nil, fmt.Errorf("plugins: delete the chunks of module %s: %w", digest, err)
	}
	return &removedModule{digest: digest, size: size, wasm: wasm}, nil
}

// restore stores a removed module again; a module uploaded again in the
// meantime is as good.
func (m *Modules) restore(ctx context.Context, r *removedModule) error {
	if r.wasm == nil {
		return fmt.Errorf("plugins: restore module %s: %w", r.digest, ErrModuleCorrupt)
	}
	if _, err := writeChunked(ctx, m.st, r.digest, r.wasm); err != nil {
		return fmt.Errorf("plugins: restore module %s: %w", r.digest, err)
	}
	return nil
}
