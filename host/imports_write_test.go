package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// importingModule is a minimal native-ABI module (tinyModule's, reconcile
// returning an empty output) that imports each of funcs from the setpoint
// module without calling them.
func importingModule(funcs ...string) []byte { return nativeModule(funcs, 1, 0, "") }

// TestWriteImportsAreOptional checks that adding the write functions kept
// the ABI backward compatible: a module importing only the functions of
// ABI 1.0, or none, still loads, one importing the write functions loads,
// and an unknown import is refused with the full list of what the host
// offers.
func TestWriteImportsAreOptional(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	ctx := context.Background()
	tests := []struct {
		name    string
		imports []string
		wantErr error
	}{
		{"no imports", nil, nil},
		{"ABI 1.0 functions", []string{"log", "get", "list", "emit_event"}, nil},
		{"write functions", []string{"create", "update", "patch", "delete", "log"}, nil},
		{"http function", []string{"http", "log"}, nil},
		{"unknown function", []string{"create", "truncate"}, host.ErrUnknownImport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.Load(ctx, "imports", importingModule(tt.imports...), host.Config{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "setpoint.truncate") || !strings.Contains(err.Error(), "emit_event,create,update,patch,delete,http}") {
					t.Errorf("refusal %q does not name the import and the write functions", err)
				}
				return
			}
			defer p.Close()
			if !p.HasReconcile() {
				t.Error("the module lost its reconcile export")
			}
		})
	}
}
