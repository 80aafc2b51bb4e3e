package host_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
)

// hostileModule builds a module of funcs functions of type () -> (), each
// body nesting depth blocks of opcode op (0x02 block, 0x03 loop), with a
// memory of one page exported as "memory". Its size is about
// funcs*2*depth bytes.
func hostileModule(funcs, depth int, op byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body []byte) {
		b.WriteByte(id)
		b.Write(binary.AppendUvarint(nil, uint64(len(body))))
		b.Write(body)
	}
	uv := func(dst []byte, v int) []byte { return binary.AppendUvarint(dst, uint64(v)) }
	sec(1, []byte{1, 0x60, 0, 0})
	fs := uv(nil, funcs)
	for range funcs {
		fs = append(fs, 0)
	}
	sec(3, fs)
	sec(5, []byte{1, 0, 1})
	sec(7, append(uv(nil, 1), append([]byte{6}, append([]byte("memory"), 0x02, 0)...)...))
	fn := []byte{0} // no locals
	for range depth {
		fn = append(fn, op, 0x40)
	}
	for range depth {
		fn = append(fn, 0x0b)
	}
	fn = append(fn, 0x0b)
	code := uv(nil, funcs)
	for range funcs {
		code = uv(code, len(fn))
		code = append(code, fn...)
	}
	sec(10, code)
	return b.Bytes()
}

// TestHostileModulesRefusedQuickly: modules shaped to make the compiler
// allocate gigabytes or spin for minutes are refused before compiling, in
// milliseconds and with little memory; the figures are printed.
func TestHostileModulesRefusedQuickly(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	tests := []struct {
		name   string
		wasm   []byte
		detail string
	}{
		// The upload that made the compile allocate over 6 GB.
		{"a million nested loops", hostileModule(1, 1_000_000, 0x03), "function 0 is 3000002 bytes; the limit is 1048576"},
		{"a million nested loops in small functions", hostileModule(1_000, 1_000, 0x03), "nesting work"},
		// The upload that kept a core busy for minutes.
		{"200,000 nested blocks", hostileModule(1, 200_000, 0x02), "nested deeper than 2000"},
		// Under the depth limit in every function, over the work limit.
		{"many functions of deep loops", hostileModule(100, 1_900, 0x03), "nesting work"},
		{"too many functions", hostileModule(150_000, 0, 0x02), "functions exceed the limit of 100000"},
		{"a huge table", tableModule(50_000_000), "declares 50000000 elements"},
		{"too many locals", localsModule(1 << 30), "more than 50000 locals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			t0 := time.Now()
			_, err := h.Load(context.Background(), "hostile", tt.wasm, host.Config{})
			took := time.Since(t0)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte module refused in %v, %d KiB allocated: %v", len(tt.wasm), took, alloc>>10, err)
			if !errors.Is(err, host.ErrInvalidModule) || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("err = %v, want ErrInvalidModule naming %q", err, tt.detail)
			}
			if took > 2*time.Second {
				t.Errorf("refusing took %v", took)
			}
			if limit := uint64(len(tt.wasm))*4 + 16<<20; alloc > limit {
				t.Errorf("refusing allocated %d bytes, more than %d", alloc, limit)
			}
		})
	}
}

// TestCompileBounds: a compile stops at its deadline and when its caller
// goes, and the compile memory budget refuses a module too large for it.
func TestCompileBounds(t *testing.T) {
	// Within the structural limits, but slow to compile: seconds of deeply
	// nested loops over many functions (about 3 s here without a deadline).
	slow := hostileModule(200, 400, 0x03)
	t.Run("deadline", func(t *testing.T) {
		h := hosttest.NewHost(t, host.Options{CompileTimeout: 300 * time.Millisecond, CacheDir: t.TempDir()})
		t0 := time.Now()
		_, err := h.Load(context.Background(), "slow", slow, host.Config{})
		t.Logf("stopped after %v: %v", time.Since(t0), err)
		if !errors.Is(err, host.ErrInvalidModule) || !strings.Contains(err.Error(), "longer than 300ms") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Fatalf("a 300ms compile deadline stopped the compile after %v", d)
		}
	})
	t.Run("caller gone", func(t *testing.T) {
		h := hosttest.NewHost(t, host.Options{CacheDir: t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		t0 := time.Now()
		_, err := h.Load(ctx, "slow", slow, host.Config{})
		t.Logf("stopped after %v: %v", time.Since(t0), err)
		if err == nil || !strings.Contains(err.Error(), "compile stopped") || time.Since(t0) > 3*time.Second {
			t.Fatalf("err = %v after %v, want the compile stopped soon after the caller left", err, time.Since(t0))
		}
	})
	t.Run("memory budget", func(t *testing.T) {
		h := hosttest.NewHost(t, host.Options{CompileMemory: 8 << 20})
		_, err := h.Load(context.Background(), "widget", hosttest.Module(t, "widget"), host.Config{})
		if !errors.Is(err, host.ErrInvalidModule) || !strings.Contains(err.Error(), "compile memory budget is 8 MiB") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("one at a time", func(t *testing.T) {
		// With one compile slot, a second load waits for the first and
		// gives up at its own deadline.
		h := hosttest.NewHost(t, host.Options{MaxCompiles: 1, CacheDir: t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first := make(chan error, 1)
		go func() {
			_, err := h.Load(ctx, "slow", slow, host.Config{})
			first <- err
		}()
		time.Sleep(100 * time.Millisecond)
		wctx, wcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer wcancel()
		_, err := h.Load(wctx, "widget", hosttest.Module(t, "widget"), host.Config{})
		if err == nil || !strings.Contains(err.Error(), "waiting for a compile slot") {
			t.Fatalf("second load: err = %v, want it to wait for the slot", err)
		}
		cancel()
		<-first
	})
}

// tableModule declares a table of n elements.
func tableModule(n int) []byte {
	var b bytes.Buffer
	b.WriteString("\x00asm\x01\x00\x00\x00")
	body := append([]byte{1, 0x70, 0}, binary.AppendUvarint(nil, uint64(n))...)
	b.WriteByte(4)
	b.Write(binary.AppendUvarint(nil, uint64(len(body))))
	b.Write(body)
	return b.Bytes()
}

// localsModule has one function declaring n i32 locals.
func localsModule(n int) []byte {
	var b bytes.Buffer
	b.WriteString("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body []byte) {
		b.WriteByte(id)
		b.Write(binary.AppendUvarint(nil, uint64(len(body))))
		b.Write(body)
	}
	sec(1, []byte{1, 0x60, 0, 0})
	sec(3, []byte{1, 0})
	fn := append([]byte{1}, binary.AppendUvarint(nil, uint64(n))...)
	fn = append(fn, 0x7f, 0x0b)
	sec(10, append(append([]byte{1}, binary.AppendUvarint(nil, uint64(len(fn)))...), fn...))
	return b.Bytes()
}
