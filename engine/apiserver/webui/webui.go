// Package webui serves Setpoint's web UI and its browser client at /ui/:
// static files embedded in the binary (assets/), plain ES modules with no
// build step. /ui/setpoint.js is the client library (list, then watch over
// WebSocket, with a consistent cache); /ui/ is the UI built on it.
//
// The files hold no secrets and are served without a token; every API call
// the UI makes carries the token the user signed in with (any bearer token
// the server accepts), kept in the tab's sessionStorage. The UI asks the
// server who that is (SelfSubjectReview) and shows only the kinds the user
// may list and watch (SelfSubjectAccessReview), everywhere or in the
// namespace the user works in; a refusal reads as a sentence naming the
// user, the verb, the resource and the namespace. The handler sets a strict Content-Security-Policy (scripts,
// styles and connections to the server's own origin only).
//
// It imports nothing of Setpoint's.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is where the UI is mounted.
const Prefix = "/ui/"

const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the UI. Mount it at Prefix and at "/ui" (which redirects).
type Handler struct {
	files map[string]file
}

// New returns a Handler over the embedded files.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".js" {
			ctype = "text/javascript; charset=utf-8"
		}
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return h
}

// ServeHTTP serves GET and HEAD of the embedded files; /ui/ is index.html.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
