package host

import "regexp"

// Guest failures carry the guest's own words: a Go guest's recovered panic
// comes with the top of its stack, a runtime's fatal error with a goroutine
// dump. Those hold values that differ from one call to the next (pointers
// and other hexadecimal words, goroutine numbers, frame offsets), and the
// engine aggregates repeated failures into one Event by their message, so
// the host rewrites them to fixed placeholders: ten panics at the same
// place read the same and count as one Event.
var (
	hexWord       = regexp.MustCompile(`\b0x[0-9a-fA-F]+\b`)
	goroutineID   = regexp.MustCompile(`\bgoroutine [0-9]+\b`)
	goroutineWait = regexp.MustCompile(`, [0-9]+ minutes\]`)
)

// normalizeTrace replaces the values of a stack trace that vary between
// otherwise identical failures: "0x1f3a40" becomes "0x?", "goroutine 17"
// becomes "goroutine N".
func normalizeTrace(s string) string {
	s = hexWord.ReplaceAllLiteralString(s, "0x?")
	s = goroutineID.ReplaceAllLiteralString(s, "goroutine N")
	return goroutineWait.ReplaceAllLiteralString(s, ", N minutes]")
}
