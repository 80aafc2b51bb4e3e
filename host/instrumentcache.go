package host

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The instrumented form of each module is kept by the digest of the
// original, in memory for the last few modules and, with a cache dir, on
// disk next to wazero's compiled code, so a load after a restart (a hit in
// wazero's cache) skips the rewrite as well as the compile.

// rewriterVersion names instrument's output in the on-disk cache; bump it
// whenever that output changes, or what it accepts.
const rewriterVersion = 4

// maxInstrumented bounds the in-memory instrumented-module cache. A module
// is rewritten once per load that misses the disk cache, and loads of one
// module come close together (an upload's check, then its Plugin; a
// version that failed and is retried), so two entries serve them; each
// holds a whole module (about 3 MB for a Go guest), and every hot swap to a
// new module adds one.
const maxInstrumented = 2

// instrumentCached returns the instrumented form of wasm, whose digest is
// digest.
func (h *Host) instrumentCached(digest string, wasm []byte) ([]byte, error) {
	h.mu.Lock()
	b, ok := h.instrumented[digest]
	h.mu.Unlock()
	if ok {
		return b, nil
	}
	path := h.instrumentedPath(digest)
	if b, ok := readInstrumented(path); ok {
		h.remember(digest, b)
		return b, nil
	}
	b, err := instrument(wasm)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := writeInstrumented(path, b); err != nil {
			h.opts.Logger.Warn("cannot cache an instrumented module", "digest", digest, "err", err.Error())
		}
	}
	h.remember(digest, b)
	return b, nil
}

func (h *Host) remember(digest string, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.instrumented[digest]; ok {
		return
	}
	if len(h.order) == maxInstrumented {
		delete(h.instrumented, h.order[0])
		h.order = h.order[1:]
	}
	h.instrumented[digest] = b
	h.order = append(h.order, digest)
}

// ForgetModule drops the cached instrumented form of the module with
// digest, in memory and on disk, once the module is deleted for good.
// Versions already loaded keep running. wazero's compilation cache in the
// same dir is wazero's own (its files are named by wazero's hash of the
// code, not by digest) and is left alone.
func (h *Host) ForgetModule(digest string) {
	h.forgetCompiled(digest)
	h.mu.Lock()
	if _, ok := h.instrumented[digest]; ok {
		delete(h.instrumented, digest)
		h.order = slices.DeleteFunc(h.order, func(d string) bool { return d == digest })
	}
	h.mu.Unlock()
	if path := h.instrumentedPath(digest); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.opts.Logger.Warn("cannot remove a cached instrumented module", "digest", digest, "err", err.Error())
		}
	}
}

// instrumentedPath is the file of the instrumented form of the module with
// digest, or "" without a cache dir.
func (h *Host) instrumentedPath(digest string) string {
	if h.opts.CacheDir == "" {
		return ""
	}
	return filepath.Join(h.opts.CacheDir, "instrumented",
		fmt.Sprintf("v%d-%s.wasm", rewriterVersion, strings.TrimPrefix(digest, "sha256:")))
}

// readInstrumented reads a cached instrumented module: its bytes, then
// their SHA-256, so that a torn or damaged file is a miss rather than a
// module without its checks.
func readInstrumented(path string) ([]byte, bool) {
	if path == "" {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < sha256.Size {
		return nil, false
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, false
	}
	return body, true
}

// writeInstrumented writes b and its SHA-256 to path through a temporary
// file, so that readers never see a partial file.
func writeInstrumented(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	_, err = f.Write(b)
	if err == nil {
		_, err = f.Write(sum[:])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
