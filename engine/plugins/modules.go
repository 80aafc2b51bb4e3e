package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/setpoint-dev/setpoint/store"
)

// modulePrefix is where module bytes live in the store, keyed by the hex
// digest. No served resource has this prefix, so neither the API nor the
// garbage collector sees modules as objects.
var modulePrefix = store.ResourcePrefix(Group, "modules", "")

// Modules is the content-addressed module store: module bytes kept in the
// object store under their sha256 digest, so a restart needs nothing else.
// It is safe for concurrent use.
type Modules struct {
	st store.Store
}

// NewModules returns the module store over st.
func NewModules(st store.Store) *Modules { return &Modules{st: st} }

func moduleKey(digest string) string {
	return modulePrefix + strings.TrimPrefix(digest, "sha256:")
}

// Put stores wasm under digest, which the caller computed from wasm. It
// reports whether the module was new; storing a module again is a no-op.
func (m *Modules) Put(ctx context.Context, digest string, wasm []byte) (created bool, err error) {
	if _, err := m.st.Create(ctx, moduleKey(digest), wasm); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return false, nil
		}
		return false, fmt.Errorf("plugins: store module %s: %w", digest, err)
	}
	return true, nil
}

// Get returns the module stored under digest, or ErrModuleNotFound.
func (m *Modules) Get(ctx context.Context, digest string) ([]byte, error) {
	kv, err := m.st.Get(ctx, moduleKey(digest), store.GetOptions{})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrModuleNotFound, digest)
		}
		return nil, fmt.Errorf("plugins: read module %s: %w", digest, err)
	}
	return kv.Value, nil
}
