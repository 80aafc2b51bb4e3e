package controller

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A FieldManager longer than a field manager may be is cut at a rune
// boundary, never inside a multi-byte rune (review nit 10).
func TestFieldManagerCutAtRuneBoundary(t *testing.T) {
	type client struct{ Client }
	rec := ReconcilerFunc(func(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) { return nil, nil })
	kind := Kind{Resource: schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}, Kind: "Widget"}
	for _, tc := range []struct {
		name, manager string
		want          int
	}{
		{"w", "", len("setpoint-controller/w")},
		{"w", strings.Repeat("a", 127) + "€", 127},
		{"w", strings.Repeat("€", 50), 126},
		{"w", strings.Repeat("a", 126) + "𝄞", 126},
		{"w", strings.Repeat("a", 200), 128},
		{strings.Repeat("é", 100), "", 128}, // "setpoint-controller/" is 20 bytes, then 54 é
	} {
		c, err := New(Options{Name: tc.name, Client: client{}, For: kind, Reconciler: rec, FieldManager: tc.manager})
		if err != nil {
			t.Fatal(err)
		}
		m := c.opts.FieldManager
		if len(m) != tc.want || !utf8.ValidString(m) {
			t.Errorf("FieldManager %q (name %q) became %q: %d bytes (want %d), valid UTF-8 %v", tc.manager, tc.name, m, len(m), tc.want, utf8.ValidString(m))
		}
	}
}
