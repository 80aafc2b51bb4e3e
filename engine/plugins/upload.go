package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/store"
)

// ModulesPath is where modules are uploaded (POST, the bytes as
// application/wasm), listed (GET), read back (GET ModulesPath/sha256:...)
// and deleted (DELETE ModulesPath/sha256:...).
const ModulesPath = "/apis/" + Group + "/" + Version + "/modules"

// DefaultMaxModuleBytes bounds an uploaded module.
const DefaultMaxModuleBytes = 64 << 20

// UploadOptions configure NewUploadHandler. Zero values get defaults.
type UploadOptions struct {
	// Modules stores accepted modules. Required.
	Modules *Modules
	// Host checks a module before it is accepted. Required.
	Host Host
	// GC lists modules with their users and deletes unused ones (GET
	// ModulesPath, DELETE ModulesPath/sha256:...). Without it those answer
	// 405.
	GC *ModuleGC
	// MaxBytes bounds a module. Default DefaultMaxModuleBytes.
	MaxBytes int64
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// ModuleInfo is the answer to an upload.
type ModuleInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Digest     string `json:"digest"`
	Size       int    `json:"size"`
	// Created is false when the module was stored already.
	Created bool `json:"created"`
}

// NewUploadHandler serves ModulesPath and the paths under it. It expects
// requests that are already authenticated: the server mounts it on the API
// server's router (apiserver.Options.Routes), behind the serving layers
// every request passes (authentication, metrics, in-flight limits,
// timeouts).
//
// POST ModulesPath takes the module bytes with Content-Type
// application/wasm. When the client states a digest (?digest=sha256:...),
// it must match the bytes. The module is compiled and checked by the host
// before it is stored; a refused module gets 422 with the host's reason. The
// check uses the server's default limits unless the request names the
// limits of the Plugin that will run the module (?memoryPages=N,
// ?callTimeout=DURATION, ?poolSize=N, as in spec.limits): a module whose
// initial memory needs more than the default cap is accepted for a Plugin
// that allows it, and the version the check loaded can serve that Plugin. The
// answer is 201 with a ModuleInfo, or 200 when the same module was stored
// already. Uploading a stored module again starts its garbage-collection
// grace period again. GET ModulesPath/sha256:... returns the bytes.
//
// GET ModulesPath lists the stored modules as a ModuleList: digest, size
// and the Plugins using each. DELETE ModulesPath/sha256:... deletes a module
// no Plugin uses, at once: 200 with its ModuleInfo, 409 naming the Plugins
// that use it, 404 when it is not stored.
func NewUploadHandler(opts UploadOptions) http.Handler {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxModuleBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &uploadHandler{opts: opts}
}

type uploadHandler struct{ opts UploadOptions }

func (h *uploadHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, ModulesPath)
	switch {
	case rest == "" || rest == "/":
		switch {
		case r.Method == http.MethodPost:
			h.upload(w, r)
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && h.opts.GC != nil:
			h.list(w, r)
		default:
			writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "upload a module with POST "+ModulesPath+" (Content-Type: application/wasm)")
		}
	case strings.HasPrefix(rest, "/"):
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			h.get(w, r, rest[1:])
		case r.Method == http.MethodDelete && h.opts.GC != nil:
			h.delete(w, r, rest[1:])
		default:
			writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "modules are immutable: only GET and DELETE are allowed")
		}
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
	}
}

func (h *uploadHandler) upload(w http.ResponseWriter, r *http.Request) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/wasm" {
		writeStatus(w, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("a module is uploaded as application/wasm, not %q", r.Header.Get("Content-Type")))
		return
	}
	want := r.URL.Query().Get("digest")
	if want != "" && !validDigest(want) {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("digest %q is not sha256: and 64 lower-case hex digits", want))
		return
	}
	if r.ContentLength > h.opts.MaxBytes {
		writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("the module is %d bytes; the limit is %d", r.ContentLength, h.opts.MaxBytes))
		return
	}
	wasm, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("the module exceeds the limit of %d bytes", h.opts.MaxBytes))
			return
		}
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "read the module: "+err.Error())
		return
	}
	if len(wasm) == 0 {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the request has no module bytes")
		return
	}
	digest := digestOf(wasm)
	if want != "" && want != digest {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("the module's digest is %s, not the stated %s", digest, want))
		return
	}
	limits, err := uploadLimits(r.URL.Query())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	if stored, err := h.opts.Modules.Touch(ctx, digest); err == nil && stored {
		writeJSON(w, http.StatusOK, ModuleInfo{APIVersion: Group + "/" + Version, Kind: "Module", Digest: digest, Size: len(wasm)})
		return
	}
	if err := h.opts.Host.Check(ctx, wasm, digest, limits); err != nil {
		if ctx.Err() != nil {
			return
		}
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "module refused: "+err.Error())
		return
	}
	created, err := h.opts.Modules.Put(ctx, digest, wasm)
	if err != nil {
		h.opts.Logger.Error("store module", "digest", digest, "err", err)
		code, reason := storeWriteStatus(err)
		writeStatus(w, code, reason, err.Error())
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		h.opts.Logger.Info("module uploaded", "digest", digest, "size", len(wasm))
	}
	writeJSON(w, code, ModuleInfo{APIVersion: Group + "/" + Version, Kind: "Module", Digest: digest, Size: len(wasm), Created: created})
}

func (h *uploadHandler) get(w http.ResponseWriter, r *http.Request, digest string) {
	if !checkDigestArg(w, digest) {
		return
	}
	wasm, err := h.opts.Modules.Get(r.Context(), digest)
	if errors.Is(err, ErrModuleNotFound) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no module "+digest+" was uploaded")
		return
	}
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/wasm")
	w.Header().Set("Content-Length", strconv.Itoa(len(wasm)))
	w.Header().Set("ETag", `"`+digest+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(wasm)
	}
}

// ModuleList is the answer to GET ModulesPath.
type ModuleList struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Items      []ModuleUsage `json:"items"`
}

func (h *uploadHandler) list(w http.ResponseWriter, r *http.Request) {
	items, err := h.opts.GC.Usage(r.Context())
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ModuleList{APIVersion: Group + "/" + Version, Kind: "ModuleList", Items: items})
}

func (h *uploadHandler) delete(w http.ResponseWriter, r *http.Request, digest string) {
	if !checkDigestArg(w, digest) {
		return
	}
	size, err := h.opts.GC.Delete(r.Context(), digest)
	var inUse *ModuleInUseError
	switch {
	case errors.As(err, &inUse):
		msg := "module " + digest + " was uploaded again while it was being deleted"
		if len(inUse.Plugins) > 0 {
			msg = "module " + digest + " is used by Plugins " + strings.Join(inUse.Plugins, ", ")
		}
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, msg)
	case errors.Is(err, ErrModuleNotFound):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no module "+digest+" is stored")
	case err != nil:
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
	default:
		writeJSON(w, http.StatusOK, ModuleInfo{APIVersion: Group + "/" + Version, Kind: "Module", Digest: digest, Size: size})
	}
}

// uploadLimits reads the limits an upload is checked with from its query:
// spec.limits' fields, bounded as the Plugin kind's schema bounds them, and
// turned into a Config as a Plugin's are (SpecLimits.config).
func uploadLimits(q url.Values) (Config, error) {
	var l SpecLimits
	if v := q.Get("memoryPages"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > 65536 {
			return Config{}, fmt.Errorf("memoryPages %q is not a number of 64 KiB pages from 1 to 65536", v)
		}
		l.MemoryPages = uint32(n)
	}
	if v := q.Get("poolSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 256 {
			return Config{}, fmt.Errorf("poolSize %q is not a number from 1 to 256", v)
		}
		l.PoolSize = n
	}
	l.CallTimeout = q.Get("callTimeout")
	return l.config()
}

// checkDigestArg reports whether digest, from a module's path, is a digest,
// answering 400 when it is not.
func checkDigestArg(w http.ResponseWriter, digest string) bool {
	if !validDigest(digest) {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("%q is not sha256: and 64 lower-case hex digits", digest))
		return false
	}
	return true
}

// digestOf is a module's content address.
func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}

// storeWriteStatus is the HTTP code and reason of a module write the store
// refused: too large for the backend (etcd's request limit) 413, a full
// disk 507, an unreachable backend 503, anything else 500.
func storeWriteStatus(err error) (int, metav1.StatusReason) {
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge
	case errors.Is(err, store.ErrNoSpace):
		return http.StatusInsufficientStorage, "InsufficientStorage"
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable
	}
	return http.StatusInternalServerError, metav1.StatusReasonInternalError
}
