package engine

// A field manager made from the User-Agent (review finding 4).

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Finding 4: the manager made from any User-Agent is a valid field manager
// (at most 128 bytes, cut at a rune boundary), so it never fails a write.
func TestManagerFromUserAgentIsValid(t *testing.T) {
	uas := []string{
		strings.Repeat("€", 100) + "/v1.0 (linux/amd64)",
		strings.Repeat("a", 127) + "€",
		strings.Repeat("a", 126) + "𝄞𝄞",
		strings.Repeat("a", 200),
		strings.Repeat("\xff", 60),
		"kubectl/v1.31.0 (linux/amd64) kubernetes/abc",
		"",
	}
	for i := 0; i < 130; i++ {
		uas = append(uas, strings.Repeat("x", i)+strings.Repeat("é€𝄞", 50))
	}
	bad := 0
	for i, ua := range uas {
		m := kinds.ManagerFromUserAgent(ua)
		errs := metav1validation.ValidateFieldManager(m, field.NewPath("fieldManager"))
		if len(m) > 128 || !utf8.ValidString(m) || len(errs) > 0 {
			t.Errorf("User-Agent %d (%d bytes): manager of %d bytes, valid UTF-8 %v, %v", i, len(ua), len(m), utf8.ValidString(m), errs)
			if bad++; bad == 3 {
				t.FailNow()
			}
		}
	}
	if m := kinds.ManagerFromUserAgent(strings.Repeat("€", 100)); len(m) != 126 {
		t.Errorf("42 whole runes of 3 bytes expected, got %d bytes", len(m))
	}
	if m := kinds.ManagerFromUserAgent(strings.Repeat("a", 200)); len(m) != 128 {
		t.Errorf("an ASCII User-Agent is cut at 128 bytes, got %d", len(m))
	}

	s := newService(t)
	m := kinds.ManagerFromUserAgent(strings.Repeat("€", 100) + "/v1.0 (linux/amd64)")
	if _, err := s.Create(context.Background(), widgets, widget("w", "small", nil), metav1.CreateOptions{FieldManager: m}); err != nil {
		t.Fatalf("create with the User-Agent's manager: %v", err)
	}
}
