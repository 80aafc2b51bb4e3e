package main

import (
	"context"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// klogTarget is the handler klog's lines go to: the server's.
var (
	klogTarget atomic.Pointer[slog.Handler]
	klogOnce   sync.Once
)

// routeKlog sends what Kubernetes' libraries log through klog (the OIDC
// authenticator's retries, client-go's warnings, the informers' errors)
// to log's handler, so that --log-level and --log-format apply to it, with
// the attribute component=k8s and anything that looks like a credential
// taken out (see klogRedact). klog's own verbosity stays 0: its V(1) and
// finer lines (client-go dumps requests and responses, bodies included, at
// V(6) and up) are never written, whatever --log-level says. klog is set
// once per process (klog.SetLogger is not safe while others log); a later
// server's handler replaces the target.
func routeKlog(log *slog.Logger) {
	h := log.Handler()
	klogTarget.Store(&h)
	klogOnce.Do(func() {
		klog.SetLogger(logr.FromSlogHandler(klogRedact{klogForward{}.WithAttrs([]slog.Attr{slog.String("component", "k8s")})}))
	})
}

// klogForward hands each record to the current klogTarget, with the
// attributes and groups it was given, in their order.
type klogForward struct {
	with []func(slog.Handler) slog.Handler
}

func (f klogForward) target() slog.Handler {
	h := *klogTarget.Load()
	for _, w := range f.with {
		h = w(h)
	}
	return h
}

func (f klogForward) Enabled(ctx context.Context, l slog.Level) bool {
	return (*klogTarget.Load()).Enabled(ctx, l)
}

func (f klogForward) Handle(ctx context.Context, r slog.Record) error {
	return f.target().Handle(ctx, r)
}

func (f klogForward) and(w func(slog.Handler) slog.Handler) klogForward {
	return klogForward{with: append(f.with[:len(f.with):len(f.with)], w)}
}

func (f klogForward) WithAttrs(attrs []slog.Attr) slog.Handler {
	return f.and(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

func (f klogForward) WithGroup(name string) slog.Handler {
	return f.and(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

// klogRedact takes credentials out of klog's lines before they are
// written: bearer tokens and JWTs in the message and in string values, and
// the whole value of an attribute whose key names a credential.
type klogRedact struct{ next slog.Handler }

const redacted = "[redacted]"

var (
	bearerRE = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+|%20)[^\s"',;]+`)
	// A JWT (ID tokens, ServiceAccount tokens): base64url JSON header,
	// payload, signature.
	jwtRE = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)
	// secretKeyRE matches attribute keys whose value is a credential.
	secretKeyRE = regexp.MustCompile(`(?i)token|password|passwd|secret|authorization|credential|cookie|private`)
)

func redactString(s string) string {
	s = bearerRE.ReplaceAllString(s, "$1 "+redacted)
	return jwtRE.ReplaceAllString(s, redacted)
}

func redactAttr(a slog.Attr) slog.Attr {
	if secretKeyRE.MatchString(a.Key) {
		return slog.String(a.Key, redacted)
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = redactAttr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindString:
		return slog.String(a.Key, redactString(v.String()))
	case slog.KindAny:
		// Errors, Stringers and structs as the handler would print them.
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case interface{ String() string }:
			s = x.String()
		default:
			return a
		}
		if r := redactString(s); r != s {
			return slog.String(a.Key, r)
		}
		return a
	}
	return a
}

func (k klogRedact) Enabled(ctx context.Context, l slog.Level) bool { return k.next.Enabled(ctx, l) }

func (k klogRedact) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redactString(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return k.next.Handle(ctx, out)
}

func (k klogRedact) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(a)
	}
	return klogRedact{k.next.WithAttrs(out)}
}

func (k klogRedact) WithGroup(name string) slog.Handler { return klogRedact{k.next.WithGroup(name)} }
