package plugins

import (
	"context"
	"log/slog"
)

// PluginLogMessage is the message of the records the Wasm host logs for a
// plugin's log host call, with the plugin's name in attribute plugin (from
// Logger.With) and the call's object in kind, namespace and name, the
// plugin's text in message and its key-value pairs in group attrs.
const PluginLogMessage = "plugin log"

// Handler returns a slog.Handler for the Wasm host's logger: it routes the
// plugins' log lines (records with message PluginLogMessage) into their
// plugin's log, passing on to next only the lines the rate limit kept, and
// passes every other record on to next.
func (l *Logs) Handler(next slog.Handler) slog.Handler {
	return &logHandler{logs: l, next: next}
}

type logHandler struct {
	logs *Logs
	next slog.Handler
	// plugin is the value of the attribute plugin given to WithAttrs
	// outside any group.
	plugin  string
	grouped bool
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool {
	// A plugin's debug lines reach its log whatever the server's level.
	return true
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != PluginLogMessage {
		if !h.next.Enabled(ctx, r.Level) {
			return nil
		}
		return h.next.Handle(ctx, r)
	}
	plugin := h.plugin
	line := LogLine{Time: r.Time, Level: r.Level}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "plugin":
			plugin = a.Value.String()
		case "kind":
			line.Kind = a.Value.String()
		case "namespace":
			line.Namespace = a.Value.String()
		case "name":
			line.Name = a.Value.String()
		case "message":
			line.Message = a.Value.String()
		case "attrs":
			if a.Value.Kind() == slog.KindGroup {
				for _, g := range a.Value.Group() {
					if line.Attrs == nil {
						line.Attrs = map[string]string{}
					}
					line.Attrs[g.Key] = g.Value.String()
				}
			}
		}
		return true
	})
	if plugin != "" && !h.logs.Add(plugin, line) {
		return nil // dropped: the server's log is bounded too
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	if !h.grouped {
		for _, a := range attrs {
			if a.Key == "plugin" {
				c.plugin = a.Value.String()
			}
		}
	}
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.grouped = c.grouped || name != ""
	return &c
}
