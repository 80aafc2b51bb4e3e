package plugins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/setpoint-dev/setpoint/store"
)

// Modules live among the server's private keys (store.PrivatePrefix), so
// that neither the API nor the garbage collector sees them as objects, and
// no CRD can serve them, whatever its group.
//
// Modules are stored in chunks so that no single store value is larger than
// moduleChunkSize: etcd refuses requests over its --max-request-bytes (1.5
// MiB by default) and modules are several MiB. A module's manifest lives
// under moduleKey(digest) and names the chunk count, the size and the
// digest; its chunks live under modulesAt.chunkPrefix(digest), apart from the
// manifests, so that listing modules (keys only, or manifests) never meets
// a chunk. The manifest is written after every chunk and deleted before
// them, so a manifest never names a missing chunk; a crash in between
// leaves orphan chunks, which the ModuleGC removes.
//
// A value under moduleKey that is not a manifest is a whole module, as
// earlier versions stored them (Wasm starts with "\x00asm", never with a
// JSON object): MigrateModules stores in chunks the ones it moves, and
// copies a corrupt one as it is.

// moduleChunkSize is the size of every chunk but the last: a third of
// etcd's default request limit, leaving room for the key and the request's
// framing.
const moduleChunkSize = 512 << 10

// moduleLayout is where modules and their chunks live in the store.
type moduleLayout struct {
	modules string // manifests (or whole modules), by hex digest
	chunks  string // chunks, by hex digest and index
}

var (
	// modulesAt is where modules live.
	modulesAt = moduleLayout{modules: store.PrivateKey("modules/"), chunks: store.PrivateKey("modulechunks/")}
	// legacyModulesAt is where servers of earlier versions kept modules:
	// under keys shaped like resources of the group setpoint.dev.
	// MigrateModules moves them to modulesAt.
	legacyModulesAt = moduleLayout{modules: "/setpoint.dev/modules/", chunks: "/setpoint.dev/modulechunks/"}
)

// key is the key of digest's manifest (or whole module).
func (l moduleLayout) key(digest string) string {
	return l.modules + strings.TrimPrefix(digest, "sha256:")
}

// digestOf is the digest of the module stored under key (key's inverse).
func (l moduleLayout) digestOf(key string) string {
	return "sha256:" + strings.TrimPrefix(key, l.modules)
}

// chunkPrefix is the prefix of digest's chunks.
func (l moduleLayout) chunkPrefix(digest string) string {
	return l.chunks + strings.TrimPrefix(digest, "sha256:") + "/"
}

// chunkKey is the key of digest's chunk i.
func (l moduleLayout) chunkKey(digest string, i int) string {
	return fmt.Sprintf("%s%06d", l.chunkPrefix(digest), i)
}

// digestOfChunk is the digest a chunk key belongs to.
func (l moduleLayout) digestOfChunk(key string) string {
	rest := strings.TrimPrefix(key, l.chunks)
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return "sha256:" + rest
}

// manifestKind marks a manifest among legacy whole modules.
const manifestKind = "ModuleManifest"

// ErrModuleCorrupt: a stored module's chunks are missing or do not match its
// digest. It is never served.
var ErrModuleCorrupt = errors.New("plugins: stored module is corrupt")

// moduleManifest describes a module stored in chunks.
type moduleManifest struct {
	Kind      string `json:"kind"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
	ChunkSize int    `json:"chunkSize"`
	Chunks    int    `json:"chunks"`
}

// parseManifest returns the manifest in value, or ok false when value is a
// module stored whole by an earlier version.
func parseManifest(value []byte) (m moduleManifest, ok bool) {
	if !bytes.HasPrefix(value, []byte("{")) {
		return m, false
	}
	if err := json.Unmarshal(value, &m); err != nil || m.Kind != manifestKind {
		return moduleManifest{}, false
	}
	return m, true
}

// writeChunked stores wasm as chunks and then its manifest. It reports
// whether the manifest was new. Chunks left by an interrupted earlier write
// are overwritten: their keys are derived from the digest, so they hold the
// same bytes unless the chunk size changed.
func writeChunked(ctx context.Context, st store.Store, digest string, wasm []byte) (bool, error) {
	return writeChunkedAt(ctx, st, modulesAt, digest, wasm)
}

// writeChunkedAt is writeChunked in layout l.
func writeChunkedAt(ctx context.Context, st store.Store, l moduleLayout, digest string, wasm []byte) (bool, error) {
	n := 0
	for off := 0; off < len(wasm) || n == 0; off += moduleChunkSize {
		part := wasm[off:min(off+moduleChunkSize, len(wasm))]
		key := l.chunkKey(digest, n)
		if _, err := st.Create(ctx, key, part); errors.Is(err, store.ErrAlreadyExists) {
			_, err = st.Update(ctx, key, part, 0)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return false, fmt.Errorf("chunk %d: %w", n, err)
			}
			if errors.Is(err, store.ErrNotFound) { // deleted meanwhile
				if _, err := st.Create(ctx, key, part); err != nil {
					return false, fmt.Errorf("chunk %d: %w", n, err)
				}
			}
		} else if err != nil {
			return false, fmt.Errorf("chunk %d: %w", n, err)
		}
		n++
	}
	man, err := json.Marshal(moduleManifest{Kind: manifestKind, Digest: digest, Size: len(wasm), ChunkSize: moduleChunkSize, Chunks: n})
	if err != nil {
		return false, err
	}
	if _, err := st.Create(ctx, l.key(digest), man); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return false, nil
		}
		return false, fmt.Errorf("manifest: %w", err)
	}
	return true, nil
}

// readModule reads the module stored under moduleKey(digest), chunked or
// whole, and checks it against digest.
func readModule(ctx context.Context, st store.Store, digest string) ([]byte, error) {
	return readModuleAt(ctx, st, modulesAt, digest)
}

// readModuleAt is readModule in layout l.
func readModuleAt(ctx context.Context, st store.Store, l moduleLayout, digest string) ([]byte, error) {
	kv, err := st.Get(ctx, l.key(digest), store.GetOptions{})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrModuleNotFound, digest)
		}
		return nil, err
	}
	wasm := kv.Value
	if man, ok := parseManifest(kv.Value); ok {
		if man.Digest != digest || man.Chunks < 1 || man.Size < 0 {
			return nil, fmt.Errorf("%w: %s: manifest names digest %s, %d chunks, size %d", ErrModuleCorrupt, digest, man.Digest, man.Chunks, man.Size)
		}
		wasm = make([]byte, 0, man.Size)
		for i := range man.Chunks {
			c, err := st.Get(ctx, l.chunkKey(digest, i), store.GetOptions{})
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("%w: %s: chunk %d of %d is missing", ErrModuleCorrupt, digest, i, man.Chunks)
			}
			if err != nil {
				return nil, fmt.Errorf("chunk %d: %w", i, err)
			}
			wasm = append(wasm, c.Value...)
		}
		if len(wasm) != man.Size {
			return nil, fmt.Errorf("%w: %s: chunks hold %d bytes, the manifest says %d", ErrModuleCorrupt, digest, len(wasm), man.Size)
		}
	}
	sum := sha256.Sum256(wasm)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return nil, fmt.Errorf("%w: %s: the stored bytes have digest %s", ErrModuleCorrupt, digest, got)
	}
	return wasm, nil
}

// deleteChunks deletes every chunk stored for digest.
func deleteChunks(ctx context.Context, st store.Store, digest string) error {
	return deleteChunksAt(ctx, st, modulesAt, digest)
}

// deleteChunksAt is deleteChunks in layout l.
func deleteChunksAt(ctx context.Context, st store.Store, l moduleLayout, digest string) error {
	keys, err := listKeys(ctx, st, l.chunkPrefix(digest))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, _, err := st.Delete(ctx, k, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	return nil
}

// listKeys lists the keys under prefix without reading values.
func listKeys(ctx context.Context, st store.Store, prefix string) ([]string, error) {
	var out []string
	_, err := store.ListPages(ctx, st, prefix, store.ListOptions{KeysOnly: true}, func(items []store.KeyValue) error {
		for _, kv := range items {
			out = append(out, kv.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// chunkedDigests returns the digests that have chunks stored, in order,
// without reading them.
func (m *Modules) chunkedDigests(ctx context.Context) ([]string, error) {
	keys, err := listKeys(ctx, m.st, modulesAt.chunks)
	if err != nil {
		return nil, fmt.Errorf("plugins: list module chunks: %w", err)
	}
	var out []string
	for _, k := range keys {
		if d := modulesAt.digestOfChunk(k); len(out) == 0 || out[len(out)-1] != d {
			out = append(out, d)
		}
	}
	return out, nil
}

// removeOrphanChunks deletes the chunks of digest, which has no manifest,
// unless it was uploaded since its upload mark was mark (errUploadedAgain)
// or its manifest has been written meanwhile.
func (m *Modules) removeOrphanChunks(ctx context.Context, digest string, mark uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks[digest] != mark {
		return errUploadedAgain
	}
	if _, err := m.st.Get(ctx, moduleKey(digest), store.GetOptions{}); err == nil {
		return errUploadedAgain
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("plugins: read module manifest %s: %w", digest, err)
	}
	if err := deleteChunks(ctx, m.st, digest); err != nil {
		return fmt.Errorf("plugins: delete orphan chunks of %s: %w", digest, err)
	}
	return nil
}
