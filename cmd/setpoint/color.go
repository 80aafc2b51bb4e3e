package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// palette colors words only when the output is a terminal that wants color:
// never on a pipe or a file, nor with NO_COLOR set or TERM=dumb.
type palette struct{ on bool }

func paletteFor(w io.Writer) palette {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return palette{}
	}
	return palette{on: term.IsTerminal(int(f.Fd()))}
}

func (p palette) wrap(code, s string) string {
	if !p.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p palette) green(s string) string  { return p.wrap("32", s) }
func (p palette) yellow(s string) string { return p.wrap("33", s) }
func (p palette) red(s string) string    { return p.wrap("31", s) }
func (p palette) bold(s string) string   { return p.wrap("1", s) }
