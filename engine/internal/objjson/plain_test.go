package objjson

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// plainRef is Plain (html false) and plainHTML (html true) a byte at a time.
func plainRef(b []byte, html bool) int {
	for i, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || html && (c == '<' || c == '>' || c == '&') {
			return i
		}
	}
	return len(b)
}

// TestPlain: Plain and plainHTML stop where a byte-at-a-time loop stops, for
// every byte value at every offset of the first two words and the tail, and
// on random documents.
func TestPlain(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := Plain(b), plainRef(b, false); got != want {
			t.Fatalf("Plain(%q) = %d, want %d", b, got, want)
		}
		if got, want := plainHTML(string(b)), plainRef(b, true); got != want {
			t.Fatalf("plainHTML(%q) = %d, want %d", b, got, want)
		}
	}
	for n := 0; n <= 19; n++ {
		for p := 0; p < n; p++ {
			for c := range 256 {
				b := make([]byte, n)
				for i := range b {
					b[i] = 'a' + byte(i%26)
				}
				b[p] = byte(c)
				check(b)
				if p+1 < n { // a second special byte after the first
					b[p+1] = '"'
					check(b)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab \x00\x1f\x7f\x80\xff\"\\<>&{}[]:,")
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(8) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(b)
	}
}

func BenchmarkPlain(b *testing.B) {
	s := make([]byte, 1000)
	for i := range s {
		s[i] = 'x'
	}
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if Plain(s) != len(s) {
			b.Fatal("not plain")
		}
	}
}

func BenchmarkPlainHTML(b *testing.B) {
	s := strings.Repeat("x", 1000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if plainHTML(s) != len(s) {
			b.Fatal("not plain")
		}
	}
}
