package plugins

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/setpoint-dev/setpoint/store"
)

// MigrateModules moves the modules a server of an earlier version stored
// under legacyModulesAt to where modules live now (modulesAt), and returns
// how many it moved. A server calls it on start, before it reads a module.
//
// It is idempotent, and safe when several servers on one store run it at
// once or a crash cuts it short: each module is written in full to its new
// place (chunks, then manifest, as an upload writes it) before anything of
// it is deleted from the old one (manifest, then chunks, as the collector
// deletes), so at every moment at least one place holds it whole, and a
// later run finishes what an earlier one began. A module whose old bytes do
// not match their digest is moved as it is, without overwriting anything at
// the new place, so that the collector finds it there (a corrupt module is
// never served).
func MigrateModules(ctx context.Context, st store.Store) (int, error) {
	digests, err := legacyDigests(ctx, st)
	if err != nil {
		return 0, fmt.Errorf("plugins: migrate modules: %w", err)
	}
	moved := 0
	for _, d := range digests {
		ok, err := migrateModule(ctx, st, d)
		if err != nil {
			return moved, fmt.Errorf("plugins: migrate module %s: %w", d, err)
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}

// legacyDigests returns the digests with a manifest or chunks under
// legacyModulesAt, in order.
func legacyDigests(ctx context.Context, st store.Store) ([]string, error) {
	mans, err := listKeys(ctx, st, legacyModulesAt.modules)
	if err != nil {
		return nil, err
	}
	chunks, err := listKeys(ctx, st, legacyModulesAt.chunks)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range mans {
		out = append(out, legacyModulesAt.digestOf(k))
	}
	for _, k := range chunks {
		out = append(out, legacyModulesAt.digestOfChunk(k))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// migrateModule moves digest from legacyModulesAt to modulesAt. It reports
// whether it found a manifest to move; chunks without one are what a write
// or delete cut short left behind (or what another server moving the module
// has yet to delete), and are deleted.
func migrateModule(ctx context.Context, st store.Store, digest string) (bool, error) {
	old, err := st.Get(ctx, legacyModulesAt.key(digest), store.GetOptions{})
	if errors.Is(err, store.ErrNotFound) {
		return false, deleteChunksAt(ctx, st, legacyModulesAt, digest)
	}
	if err != nil {
		return false, err
	}
	wasm, err := readModuleAt(ctx, st, legacyModulesAt, digest)
	switch {
	case err == nil:
		if _, err := writeChunkedAt(ctx, st, modulesAt, digest, wasm); err != nil {
			return false, err
		}
	case errors.Is(err, ErrModuleCorrupt):
		// Either another server moved the module and is deleting its
		// chunks here, or the old bytes are corrupt.
		if err := copyCorrupt(ctx, st, digest, old.Value); err != nil {
			return false, err
		}
	case errors.Is(err, ErrModuleNotFound):
		return false, deleteChunksAt(ctx, st, legacyModulesAt, digest) // another server moved it
	default:
		return false, err
	}
	if _, _, err := st.Delete(ctx, legacyModulesAt.key(digest), 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("delete the old manifest: %w", err)
	}
	if err := deleteChunksAt(ctx, st, legacyModulesAt, digest); err != nil {
		return false, fmt.Errorf("delete the old chunks: %w", err)
	}
	return true, nil
}

// copyCorrupt copies a corrupt module's old keys as they are, chunks first,
// unless its manifest already stands at the new place (moved by another
// server, or uploaded again); it overwrites nothing there.
func copyCorrupt(ctx context.Context, st store.Store, digest string, manifest []byte) error {
	if _, err := st.Get(ctx, modulesAt.key(digest), store.GetOptions{}); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	keys, err := listKeys(ctx, st, legacyModulesAt.chunkPrefix(digest))
	if err != nil {
		return err
	}
	for _, k := range keys {
		kv, err := st.Get(ctx, k, store.GetOptions{})
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		nk := modulesAt.chunks + k[len(legacyModulesAt.chunks):]
		if _, err := st.Create(ctx, nk, kv.Value); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			return fmt.Errorf("copy chunk %s: %w", k, err)
		}
	}
	if _, err := st.Create(ctx, modulesAt.key(digest), manifest); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("copy the manifest: %w", err)
	}
	return nil
}
