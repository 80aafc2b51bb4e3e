package host

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	p := &Plugin{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		}}))}
	out := &tailBuffer{}
	w := p.guestOutput(out)
	for _, s := range []string{"one\r\ntw", "o\n", "\n", strings.Repeat("x", maxGuestLine+10), "\nend"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	want := "message=one\nmessage=two\nmessage=\"\"\nmessage=" + strings.Repeat("x", maxGuestLine) + "\nmessage=xxxxxxxxxx\n"
	if got := buf.String(); got != want {
		t.Errorf("logged:\n%.200s\nwant:\n%.200s", got, want)
	}
	if !strings.HasPrefix(out.String(), "one\r\ntwo\n\n") {
		t.Errorf("the tail buffer lost the output: %.40q", out.String())
	}
}
