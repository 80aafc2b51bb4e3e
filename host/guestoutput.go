package host

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
)

// maxGuestLine bounds one line of a guest's stdout or stderr in the log,
// as the log host function bounds a message.
const maxGuestLine = 4096

// guestOutput returns the writer of an instance's stdout and stderr: out,
// which keeps what a failure reports, and the plugin's log, one record per
// line like the log host function's (message "plugin log", no object), so
// that what a guest prints (printf, fmt.Println, a runtime's panic) reaches
// the plugin's log.
func (p *Plugin) guestOutput(out *tailBuffer) io.Writer { return &lineWriter{p: p, out: out} }

// lineWriter cuts a guest's output into lines.
type lineWriter struct {
	p   *Plugin
	out *tailBuffer

	mu      sync.Mutex // guards partial
	partial []byte     // the line being written, up to maxGuestLine bytes
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n, err := w.out.Write(b)
	var lines []string
	w.mu.Lock()
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := maxGuestLine - len(w.partial); len(chunk) > room {
			chunk = chunk[:room]
			i = -2 // a full line without its end: cut it here
		}
		w.partial = append(w.partial, chunk...)
		switch {
		case i >= 0:
			b = b[i+1:]
		case i == -2:
			b = b[len(chunk):]
		default:
			b = nil
			continue
		}
		lines = append(lines, string(bytes.TrimSuffix(w.partial, []byte("\r"))))
		w.partial = w.partial[:0]
	}
	w.mu.Unlock()
	for _, l := range lines {
		w.p.log.LogAttrs(context.Background(), slog.LevelInfo, "plugin log", slog.String("message", l))
	}
	return n, err
}
