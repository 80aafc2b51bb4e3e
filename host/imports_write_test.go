package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// importingModule assembles a minimal native-ABI module (the exports of
// tinyModule, reconcile returning an empty output) that imports each of
// funcs from the setpoint module with the host-call signature
// (i32, i32, i32, i32) -> i32, without calling them.
func importingModule(funcs ...string) []byte {
	leb := func(b []byte, v uint64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	name := func(b []byte, s string) []byte { return append(leb(b, uint64(len(s))), s...) }
	section := func(m []byte, id byte, body []byte) []byte {
		return append(leb(append(m, id), uint64(len(body))), body...)
	}
	const i32, i64 = 0x7f, 0x7e
	m := []byte("\x00asm\x01\x00\x00\x00")
	// Types: 0 () -> i32, 1 (i32) -> i32, 2 (i32, i32) -> i64, 3 (i32 x4) -> i32.
	m = section(m, 1, []byte{4, 0x60, 0, 1, i32, 0x60, 1, i32, 1, i32, 0x60, 2, i32, i32, 1, i64, 0x60, 4, i32, i32, i32, i32, 1, i32})
	imports := leb(nil, uint64(len(funcs)))
	for _, f := range funcs {
		imports = name(name(imports, "setpoint"), f)
		imports = append(imports, 0, 3)
	}
	m = section(m, 2, imports)
	m = section(m, 3, []byte{3, 0, 1, 2})
	m = section(m, 5, []byte{1, 0x00, 1})
	n := byte(len(funcs)) // imported functions come first in the index space
	exports := []byte{4}
	exports = append(name(exports, "memory"), 2, 0)
	exports = append(name(exports, "setpoint_abi_version"), 0, n)
	exports = append(name(exports, "setpoint_alloc"), 0, n+1)
	exports = append(name(exports, "reconcile"), 0, n+2)
	m = section(m, 7, exports)
	code := []byte{3,
		4, 0, 0x41, 1, 0x0b, // version 1
		5, 0, 0x41, 0x80, 0x08, 0x0b, // 1024
		4, 0, 0x42, 0, 0x0b, // packed result 0
	}
	return section(m, 10, code)
}

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
		{"unknown function", []string{"create", "truncate"}, host.ErrUnknownImport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.Load(ctx, "imports", importingModule(tt.imports...), host.Config{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "setpoint.truncate") || !strings.Contains(err.Error(), "emit_event,create,update,patch,delete}") {
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
