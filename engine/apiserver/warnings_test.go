package apiserver

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// TestWarningHeadersMatchLibrary holds headerWarnings to apimachinery's
// Warning header codec, which kube-apiserver writes with and client-go
// reads with: each warning is the header NewWarningHeader makes (299, agent
// "-"), a client's ParseWarningHeaders gets every text back, and a text no
// header can carry (empty, not UTF-8, control characters) is dropped as
// kube-apiserver's recorder drops it. Chosen texts and random ones (fixed
// seed).
func TestWarningHeadersMatchLibrary(t *testing.T) {
	texts := []string{
		"plain", `unknown field "spec.x"`, `back\slash`, "é漢😀", "\u2028 line separator",
		"\u00a0no-break space", "\ufeffbyte order mark", "tab\tinside", "",
		"new\nline", "nul\x00", "del\x7f", "bad\xffutf-8", "plain", // a repeat
	}
	rnd := rand.New(rand.NewPCG(14, 6))
	pool := []rune("az \"\\\t\n\x00\x7f\u0085\u00a0\u2028\ufeffé漢😀")
	for range 30 {
		var b strings.Builder
		for range rnd.IntN(10) {
			b.WriteRune(pool[rnd.IntN(len(pool))])
		}
		texts = append(texts, b.String())
	}
	h := http.Header{}
	hw := &headerWarnings{h: h}
	var want []string
	var wantTexts []string
	for _, text := range texts {
		hw.AddWarning("", text)
		header, err := utilnet.NewWarningHeader(299, "-", text)
		carries := text != "" && utf8.ValidString(text) && !strings.ContainsFunc(text, unicode.IsControl)
		if (err == nil) != carries && text != "" {
			t.Fatalf("%q: NewWarningHeader error %v; the test's idea of a header text is wrong", text, err)
		}
		if carries && !slices.Contains(wantTexts, text) {
			want = append(want, header)
			wantTexts = append(wantTexts, text)
		}
	}
	if len(want) >= maxWarnings || len(want) < 10 {
		t.Fatalf("%d warnings: the comparison must stay under maxWarnings (%d) and compare some", len(want), maxWarnings)
	}
	got := h.Values("Warning")
	if !slices.Equal(got, want) {
		t.Errorf("Warning headers:\n%s\nwant (apimachinery):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	parsed, errs := utilnet.ParseWarningHeaders(got)
	if len(errs) > 0 {
		t.Errorf("ParseWarningHeaders: %v", errs)
	}
	var back []string
	for _, w := range parsed {
		if w.Code != 299 || w.Agent != "-" {
			t.Errorf("warning %+v, want code 299 and agent -", w)
		}
		back = append(back, w.Text)
	}
	if !slices.Equal(back, wantTexts) {
		t.Errorf("texts a client reads:\n%q\nwant\n%q", back, wantTexts)
	}

	// At most maxWarnings distinct warnings are kept.
	h2 := http.Header{}
	hw2 := &headerWarnings{h: h2}
	for i := range maxWarnings + 10 {
		hw2.AddWarning("", fmt.Sprint("warning ", i))
	}
	if n := len(h2.Values("Warning")); n != maxWarnings {
		t.Errorf("%d warnings kept, want %d", n, maxWarnings)
	}
}
