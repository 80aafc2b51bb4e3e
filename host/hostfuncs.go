package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/tetratelabs/wazero/api"
)

// ObjectReader serves the get and list host functions as the plugin named
// plugin. The server implements it over its store (and may authorize the
// plugin's access too); the host checks permissions before calling it.
type ObjectReader interface {
	// GetObject returns one object, found false when it does not exist.
	GetObject(ctx context.Context, plugin string, req abi.GetRequest) (obj []byte, found bool, err error)
	// ListObjects returns the objects of a kind that match the request.
	ListObjects(ctx context.Context, plugin string, req abi.ListRequest) ([][]byte, error)
}

// ObjectWriter serves the write host functions (create, update, patch,
// delete). The host offers them when Options.Objects also implements it; it
// checks the plugin's write permission, refuses writes during admit calls,
// and counts each write in the host-call budget before calling it.
// WriteObject runs one write as the plugin named plugin, under ctx (the
// call's deadline), and answers with the stored object or the error with its
// Kubernetes reason and code.
type ObjectWriter interface {
	WriteObject(ctx context.Context, plugin, fn string, req abi.WriteRequest) abi.WriteResponse
}

// EventRecorder records the events plugins emit.
type EventRecorder interface {
	RecordEvent(ctx context.Context, plugin string, regarding abi.ObjectRef, ev abi.Event) error
}

// Permissions say what a plugin may do through host functions. Logging is
// always allowed (and bounded by the host-call budget).
type Permissions struct {
	// Read lists the kinds the plugin may get and list, each as
	// "Kind.group", or "Kind" for the core group; "*" allows every kind.
	Read []string
	// Write lists the kinds the plugin may create, update, patch and
	// delete, named like Read; "*" allows every kind.
	Write []string
	// Events allows emit_event.
	Events bool
}

// mayRead reports whether the permissions allow reading kind of apiVersion.
func (p Permissions) mayRead(apiVersion, kind string) bool {
	return slices.Contains(p.Read, "*") || slices.Contains(p.Read, groupKind(apiVersion, kind))
}

// mayWrite reports whether the permissions allow writing kind of apiVersion.
func (p Permissions) mayWrite(apiVersion, kind string) bool {
	return slices.Contains(p.Write, "*") || slices.Contains(p.Write, groupKind(apiVersion, kind))
}

// groupKind is "Kind.group", or "Kind" for the core group.
func groupKind(apiVersion, kind string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return kind
	}
	return kind + "." + group
}

// errBudget aborts a call whose guest exceeded its host-call budget.
var errBudget = errors.New("host-call budget exhausted")

// callScope is the state of one call that host functions see, carried in
// the call's context.
type callScope struct {
	p      *Plugin
	export string
	// ref computes the reference of the call's object; object caches it
	// once a host call that logs or emits an event needs it.
	ref      func() abi.ObjectRef
	object   abi.ObjectRef
	resolved bool
	calls    int
	// config is the Plugin's configuration from the request (Extism's
	// config_get serves it).
	config map[string]string
	// pending is a response too large for the guest's buffer, fetched with
	// the result host function (native ABI).
	pending []byte
	buf     []byte
	// extismHTTP is the last response of Extism's http_request, which
	// http_status_code and http_headers report.
	extismHTTP extismHTTP
}

// objectRef is the reference of the call's object, computed on first use.
func (s *callScope) objectRef() abi.ObjectRef {
	if !s.resolved {
		s.object, s.resolved = s.ref(), true
	}
	return s.object
}

type scopeKey struct{}

func scopeOf(ctx context.Context) *callScope {
	s, _ := ctx.Value(scopeKey{}).(*callScope)
	return s
}

// logLine writes one line a guest logged to the plugin's log, with the
// call's object.
func (s *callScope) logLine(ctx context.Context, level slog.Level, msg string, extra map[string]string) {
	obj := s.objectRef()
	attrs := []slog.Attr{
		slog.String("kind", obj.Kind), slog.String("namespace", obj.Namespace),
		slog.String("name", obj.Name), slog.String("message", truncate(msg, 4096)),
	}
	if len(extra) > 0 {
		g := make([]any, 0, len(extra))
		for k, v := range extra {
			g = append(g, slog.String(k, truncate(v, 1024)))
		}
		attrs = append(attrs, slog.Group("attrs", g...))
	}
	s.p.log.LogAttrs(ctx, level, "plugin log", attrs...)
}

// handle runs one host call and returns its response document.
func (s *callScope) handle(ctx context.Context, fn string, req []byte) []byte {
	s.calls++
	if s.calls > s.p.cfg.Limits.MaxHostCalls {
		panic(errBudget)
	}
	p := s.p
	switch fn {
	case abi.HostLog:
		var r abi.LogRequest
		if err := r.UnmarshalJSON(req); err != nil {
			return s.errorDoc("log: " + err.Error())
		}
		level := slog.LevelInfo
		switch r.Level {
		case "debug":
			level = slog.LevelDebug
		case "warn":
			level = slog.LevelWarn
		case "error":
			level = slog.LevelError
		}
		s.logLine(ctx, level, r.Message, r.Attrs)
		return s.errorDoc("")
	case abi.HostGet:
		var r abi.GetRequest
		if err := r.UnmarshalJSON(req); err != nil {
			return s.errorDoc("get: " + err.Error())
		}
		if err := s.checkRead(r.APIVersion, r.Kind); err != nil {
			return s.errorDoc(err.Error())
		}
		obj, found, err := p.host.opts.Objects.GetObject(ctx, p.name, r)
		resp := abi.GetResponse{Object: obj, Found: found}
		if err != nil {
			resp = abi.GetResponse{Error: "get: " + err.Error()}
		}
		s.buf = resp.AppendJSON(s.buf[:0])
		return s.buf
	case abi.HostList:
		var r abi.ListRequest
		if err := r.UnmarshalJSON(req); err != nil {
			return s.errorDoc("list: " + err.Error())
		}
		if err := s.checkRead(r.APIVersion, r.Kind); err != nil {
			return s.errorDoc(err.Error())
		}
		items, err := p.host.opts.Objects.ListObjects(ctx, p.name, r)
		resp := abi.ListResponse{Items: make([]abi.RawJSON, len(items))}
		for i, it := range items {
			resp.Items[i] = it
		}
		if err != nil {
			resp = abi.ListResponse{Error: "list: " + err.Error()}
		}
		s.buf = resp.AppendJSON(s.buf[:0])
		return s.buf
	case abi.HostEmitEvent:
		var r abi.EmitEventRequest
		if err := r.UnmarshalJSON(req); err != nil {
			return s.errorDoc("emit_event: " + err.Error())
		}
		if !p.cfg.Permissions.Events {
			return s.errorDoc(fmt.Sprintf("%v: plugin %q may not emit events", ErrPermissionDenied, p.name))
		}
		if r.Type != "Normal" && r.Type != "Warning" {
			return s.errorDoc(fmt.Sprintf("emit_event: type %q is neither Normal nor Warning", r.Type))
		}
		regarding := r.Regarding
		if regarding == (abi.ObjectRef{}) {
			regarding = s.objectRef()
		}
		if p.host.opts.Events == nil {
			p.log.InfoContext(ctx, "plugin event", "kind", regarding.Kind, "namespace", regarding.Namespace,
				"name", regarding.Name, "type", r.Type, "reason", r.Reason, "message", r.Message)
			return s.errorDoc("")
		}
		if err := p.host.opts.Events.RecordEvent(ctx, p.name, regarding, r.Event); err != nil {
			return s.errorDoc("emit_event: " + err.Error())
		}
		return s.errorDoc("")
	case abi.HostCreate, abi.HostUpdate, abi.HostPatch, abi.HostDelete:
		return s.write(ctx, fn, req)
	case abi.HostHTTP:
		return s.http(ctx, req)
	}
	return s.errorDoc("unknown host function " + fn)
}

// write serves the write host functions: it checks the request, the call's
// export and the plugin's permissions, then hands the write to the server's
// ObjectWriter.
func (s *callScope) write(ctx context.Context, fn string, req []byte) []byte {
	var r abi.WriteRequest
	if err := r.UnmarshalJSON(req); err != nil {
		return s.writeError(fn+": "+err.Error(), "BadRequest", 400)
	}
	apiVersion, kind, name := r.APIVersion, r.Kind, r.Name
	if fn == abi.HostCreate || fn == abi.HostUpdate {
		ref := abi.RefOf(r.Object)
		apiVersion, kind, name = ref.APIVersion, ref.Kind, ref.Name
		if name == "" && fn == abi.HostCreate {
			name = r.Object.String("metadata", "generateName")
		}
	}
	switch {
	case kind == "" || name == "":
		return s.writeError(fn+": the request names no kind or no name", "BadRequest", 400)
	case r.Subresource != "" && (r.Subresource != "status" || fn == abi.HostCreate || fn == abi.HostDelete):
		return s.writeError(fmt.Sprintf("%s: subresource %q is not writable (only update and patch take \"status\")", fn, r.Subresource), "BadRequest", 400)
	}
	p := s.p
	if s.export == abi.ExportAdmit {
		// Admission must have no side effects (dry runs), and a write would
		// re-enter admission, possibly of this plugin, whose pool this call
		// already draws on.
		return s.writeError(fmt.Sprintf("%v: plugin %q may not write during admission (%s %s)", ErrPermissionDenied, p.name, fn, groupKind(apiVersion, kind)), "Forbidden", 403)
	}
	if !p.cfg.Permissions.mayWrite(apiVersion, kind) {
		return s.writeError(fmt.Sprintf("%v: plugin %q may not write %s", ErrPermissionDenied, p.name, groupKind(apiVersion, kind)), "Forbidden", 403)
	}
	w, ok := p.host.opts.Objects.(ObjectWriter)
	if !ok {
		return s.writeError(fmt.Sprintf("%v: this server serves no object writes to plugins", ErrPermissionDenied), "Forbidden", 403)
	}
	if err := ctx.Err(); err != nil {
		return s.writeError(fmt.Sprintf("%s: the call's deadline passed: %v", fn, err), "Timeout", 504)
	}
	resp := w.WriteObject(ctx, p.name, fn, r)
	if resp.Error != "" {
		resp.Object = nil
		if resp.Code == 0 {
			resp.Code = 500
		}
		if resp.Reason == "" {
			resp.Reason = "InternalError"
		}
	}
	s.buf = resp.AppendJSON(s.buf[:0])
	return s.buf
}

func (s *callScope) writeError(msg, reason string, code int) []byte {
	r := abi.WriteResponse{Error: msg, Reason: reason, Code: code}
	s.buf = r.AppendJSON(s.buf[:0])
	return s.buf
}

func (s *callScope) checkRead(apiVersion, kind string) error {
	if !s.p.cfg.Permissions.mayRead(apiVersion, kind) {
		return fmt.Errorf("%w: plugin %q may not read %s", ErrPermissionDenied, s.p.name, groupKind(apiVersion, kind))
	}
	if s.p.host.opts.Objects == nil {
		return fmt.Errorf("%w: this server serves no object reads to plugins", ErrPermissionDenied)
	}
	return nil
}

func (s *callScope) errorDoc(msg string) []byte {
	r := abi.HostResponse{Error: msg}
	s.buf = r.AppendJSON(s.buf[:0])
	return s.buf
}

// nativeHostCall implements the native ABI's host functions:
// (reqPtr, reqLen, outPtr, outCap i32) -> i32.
func nativeHostCall(ctx context.Context, m api.Module, fn string, stack []uint64) {
	s := scopeOf(ctx)
	if s == nil {
		panic(errors.New("host function called outside a plugin call"))
	}
	reqPtr, reqLen := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	outPtr, outCap := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	req, ok := m.Memory().Read(reqPtr, reqLen)
	if !ok {
		panic(fmt.Errorf("host call %s: request [%d, +%d) is outside guest memory", fn, reqPtr, reqLen))
	}
	resp := s.handle(ctx, fn, req)
	s.pending = s.pending[:0]
	if uint32(len(resp)) <= outCap {
		if !m.Memory().Write(outPtr, resp) {
			panic(fmt.Errorf("host call %s: response buffer at %d is outside guest memory", fn, outPtr))
		}
	} else {
		s.pending = append(s.pending, resp...)
	}
	stack[0] = api.EncodeU32(uint32(len(resp)))
}

// nativeResult implements result(outPtr, outCap i32) -> i32.
func nativeResult(ctx context.Context, m api.Module, stack []uint64) {
	s := scopeOf(ctx)
	if s == nil {
		panic(errors.New("host function called outside a plugin call"))
	}
	outPtr, outCap := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	n := min(uint32(len(s.pending)), outCap)
	if !m.Memory().Write(outPtr, s.pending[:n]) {
		panic(fmt.Errorf("host call result: buffer at %d is outside guest memory", outPtr))
	}
	s.pending = s.pending[:0]
	stack[0] = api.EncodeU32(n)
}
