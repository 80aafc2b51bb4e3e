package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// instrumentBounded runs instrument and fails the test when it takes
// longer than bound: the rewriter must end on every input.
func instrumentBounded(t *testing.T, wasm []byte, bound time.Duration) ([]byte, error) {
	t.Helper()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := instrument(wasm)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(bound):
		t.Fatalf("instrument ran for more than %v on %d bytes", bound, len(wasm))
		return nil, nil
	}
}

// compileShape checks wasm as Load does before compiling (checkCounts),
// compiles it with wazero and describes its imports and
// exports, or returns the compile error.
func compileShape(rt wazero.Runtime, wasm []byte) (string, error) {
	ctx := context.Background()
	if err := checkCounts(wasm); err != nil {
		return "", err
	}
	m, err := compileModule(ctx, rt, wasm)
	if err != nil {
		return "", err
	}
	defer m.Close(ctx)
	var s []string
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		s = append(s, fmt.Sprintf("import %s.%s%s", mod, name, sig(f)))
	}
	for name, f := range m.ExportedFunctions() {
		s = append(s, fmt.Sprintf("export func %s%s", name, sig(f)))
	}
	for name, mem := range m.ExportedMemories() {
		mx, _ := mem.Max()
		s = append(s, fmt.Sprintf("export memory %s %d %d", name, mem.Min(), mx))
	}
	s = append(s, fmt.Sprintf("imported memories %d", len(m.ImportedMemories())))
	slices.Sort(s)
	return fmt.Sprint(s), nil
}

// checkInstrument asserts the rewriter's contract on one input: it ends,
// never panics, and a module it returns compiles exactly when the input
// does, with the same imports and exports.
func checkInstrument(t *testing.T, rt wazero.Runtime, wasm []byte) ([]byte, error) {
	t.Helper()
	out, err := instrumentBounded(t, wasm, 10*time.Second)
	if err != nil {
		if !errors.Is(err, errUninstrumentable) {
			t.Fatalf("error %v does not wrap errUninstrumentable", err)
		}
		return nil, err
	}
	orig, origErr := compileShape(rt, wasm)
	inst, instErr := compileShape(rt, out)
	switch {
	case origErr == nil && instErr != nil:
		t.Fatalf("the original compiles, the instrumented module does not: %v", instErr)
	case origErr != nil && instErr == nil:
		t.Fatalf("the original does not compile (%v), the instrumented module does", origErr)
	case origErr == nil && orig != inst:
		t.Fatalf("imports and exports changed:\n%s\n%s", orig, inst)
	}
	return out, nil
}

// fuzzSeeds are hand-made modules of every shape the rewriter handles and
// refuses, and the real guests when they are built.
func fuzzSeeds() [][]byte {
	tree := callTree(3, 4)
	seeds := [][]byte{
		guestModule(guestSpec{}),
		guestModule(guestSpec{reconcile: spinUnless(nestedLoops)}),
		guestModule(guestSpec{reconcile: spinUnless(brTableLoop)}),
		guestModule(guestSpec{reconcile: spinUnless(callInLoop), extra: [][]byte{countedLoop}}),
		guestModule(guestSpec{reconcile: spinUnless([]byte{0x10, 0x04}), extra: tree}),
		guestModule(guestSpec{globals: 2, reconcile: spinUnless([]byte{0x23, 0x01, 0x24, 0x00})}),
		guestModule(guestSpec{start: 2}),
		guestModule(guestSpec{noYield: true}),
		guestModule(guestSpec{reconcile: spinUnless(hiddenLoop)}),
		guestModule(guestSpec{reconcile: spinUnless(callIndirectLoop), extra: [][]byte{spinLoop}, table: true, custom: "name"}),
	}
	// The real guests take seconds to compile twice under the race
	// detector: they seed fuzzing, while plain test runs cover them by
	// loading them (TestWidgetConformance, TestSpinningGuestDoesNotStallGC).
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		return seeds
	}
	for _, name := range []string{"widget", "faulty"} {
		if b, err := os.ReadFile(filepath.Join("..", "bin", "wasm", name+".wasm")); err == nil {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

func FuzzInstrument(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { rt.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, wasm []byte) {
		checkInstrument(t, rt, wasm)
	})
}

// TestInstrumentMalformed: malformed and hostile modules get a clear error
// (and the host falls back to wazero's close-on-context-done) or a module
// that compiles exactly when the original does; never a panic.
func TestInstrumentMalformed(t *testing.T) {
	valid := guestModule(guestSpec{reconcile: spinUnless(nestedLoops)})
	header := []byte("\x00asm\x01\x00\x00\x00")
	// codeRaw replaces the code section (id 10) of a plain module.
	codeRaw := func(code []byte) []byte {
		m := guestModule(guestSpec{})
		r := reader{b: m, i: 8}
		for {
			start := r.i
			id := r.byte()
			body := r.bytes(int(r.u32()))
			if id == 10 {
				return append(wsection(slices.Clone(m[:start]), 10, code), m[r.i:]...)
			}
			_ = body
		}
	}
	codeSection := func(bodies ...[]byte) []byte {
		code := leb(nil, uint64(len(bodies)))
		for _, b := range bodies {
			code = append(code, b...)
		}
		return codeRaw(code)
	}
	// withYield is a header, types and the sched_yield import.
	withYield := wsection(wsection(slices.Clone(header), 1, []byte{1, 0x60, 0, 1, 0x7f}), 2,
		append(wname(wname([]byte{1}, "wasi_snapshot_preview1"), "sched_yield"), 0, 0))
	fn := func(b ...byte) []byte { return append(leb(nil, uint64(len(b))), b...) }
	ok := fn(0, 0x41, 0x00, 0x0b)
	rec := fn(0, 0x42, 0x00, 0x0b)
	tests := []struct {
		name string
		wasm []byte
		want string // "error": errUninstrumentable; "": a module (checked)
	}{
		{"empty", nil, "error"},
		{"not wasm", []byte("\x7fELF\x02\x01\x01\x00"), "error"},
		{"header only", header, "error"},
		{"truncated section size", append(slices.Clone(header), 1, 0x80), "error"},
		{"section longer than the module", append(slices.Clone(header), 1, 0x20, 0x00), "error"},
		{"LEB128 of six bytes", append(slices.Clone(header), 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), "error"},
		{"LEB128 past 32 bits", append(slices.Clone(header), 0, 0xff, 0xff, 0xff, 0xff, 0x7f), "error"},
		{"huge type count", wsection(slices.Clone(header), 1, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x60, 0, 0}), "error"},
		{"huge import count", wsection(slices.Clone(header), 2, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), "error"},
		{"huge function count in code", codeRaw([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x02, 0x00, 0x0b}), "error"},
		{"huge local count", codeSection(ok, ok, fn(0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x0b)), "error"},
		{"body longer than the section", codeSection(ok, ok, []byte{0x40, 0x00, 0x0b}), "error"},
		{"body without end", codeSection(ok, ok, fn(0, 0x42, 0x00)), ""},
		{"unknown opcode", codeSection(ok, ok, fn(0, 0xfd, 0x0c, 0x0b)), "error"},
		{"truncated immediate", codeSection(ok, ok, fn(0, 0x42)), "error"},
		{"tail call", codeSection(ok, ok, fn(0, 0x12, 0x03, 0x0b)), "error"},
		{"bad block type", codeSection(ok, ok, fn(0, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0b, 0x42, 0x00, 0x0b)), "error"},
		// Each body's counting local follows its type's parameters, so a
		// body without a function (and type) is refused.
		{"wrong body count", codeSection(ok, ok, rec, rec), "error"},
		{"duplicated section", wsection(slices.Clone(valid), 11, []byte{0}), "error"},
		{"sections out of order", wsection(slices.Clone(valid), 1, []byte{0}), "error"},
		{"unknown section", wsection(slices.Clone(valid), 13, nil), "error"},
		{"global count at the limit", wsection(slices.Clone(withYield), 6, leb(nil, maxGlobals-1)), "error"},
		{"huge global count", wsection(slices.Clone(withYield), 6, leb(nil, 1<<32-1)), "error"},
		{"exports the stop global's name", guestModule(guestSpec{exports: append(wname(nil, stopGlobal), 0, 1), nexports: 1}), "error"},
		{"exports an undefined global", guestModule(guestSpec{exports: append(wname(nil, "g"), 3, 0), nexports: 1}), "error"},
		{"writes an undefined global", guestModule(guestSpec{reconcile: spinUnless([]byte{0x41, 0x00, 0x24, 0x01})}), "error"},
		{"reads an undefined global", guestModule(guestSpec{globals: 1, reconcile: spinUnless([]byte{0x23, 0x01, 0x1a})}), "error"},
		{"sched_yield of the wrong signature", guestModule(guestSpec{yieldNoRet: true}), "error"},
		{"no sched_yield", guestModule(guestSpec{noYield: true}), "error"},
		{"start function", guestModule(guestSpec{start: 2}), "error"},
		// A value type of more than one byte, (ref null 2), wherever the
		// rewriter reads one: each would let the compiler read bytes the
		// rewriter skipped, or the reverse.
		{"typed reference block type", guestModule(guestSpec{reconcile: spinUnless(hiddenLoop)}), "error"},
		{"typed reference local", guestModule(guestSpec{reconcileLocals: []byte{1, 1, 0x63, 0x02}, reconcile: spinUnless(nil)}), "error"},
		{"typed reference select", guestModule(guestSpec{reconcile: spinUnless([]byte{0x02, 0x40, 0x00, 0x1c, 0x01, 0x63, 0x02, 0x1a, 0x0b})}), "error"},
		{"typed reference parameter", typedParamModule(), "error"},
		{"tees the counting local", guestModule(guestSpec{reconcile: spinUnless([]byte{0x41, 0x00, 0x22, 0x03, 0x1a})}), "error"},
		{"reads the counting local", guestModule(guestSpec{reconcile: spinUnless([]byte{0x20, 0x03, 0x1a})}), "error"},
		{"defined globals", guestModule(guestSpec{globals: 3, reconcile: spinUnless([]byte{0x23, 0x02, 0x24, 0x00})}), ""},
		{"valid", valid, ""},
	}
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(context.Background())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := checkInstrument(t, rt, tt.wasm)
			if tt.want == "error" && err == nil {
				t.Fatalf("instrumented, want an error")
			}
			if tt.want == "" && err != nil {
				t.Fatalf("err = %v, want a module", err)
			}
			if out != nil {
				if _, err := compileShape(rt, out); err == nil {
					checkStopExported(t, out)
				}
			}
		})
	}
}

// checkStopExported instantiates an instrumented module and checks that
// its stop global is exported to the host, mutable.
func checkStopExported(t *testing.T, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	rt.NewHostModuleBuilder("wasi_snapshot_preview1").NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(context.Context, []uint64) {}), nil, i32x1).Export("sched_yield").
		Instantiate(ctx)
	mod, err := rt.InstantiateModule(ctx, mustCompile(t, rt, wasm), wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mod.ExportedGlobal(stopGlobal).(api.MutableGlobal); !ok {
		t.Fatalf("%s is not an exported mutable global", stopGlobal)
	}
}

func mustCompile(t *testing.T, rt wazero.Runtime, wasm []byte) wazero.CompiledModule {
	t.Helper()
	m, err := rt.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInstrumentTruncated feeds every prefix of a module to the rewriter.
func TestInstrumentTruncated(t *testing.T) {
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(context.Background())
	m := guestModule(guestSpec{reconcile: spinUnless(callInLoop), extra: [][]byte{countedLoop}})
	for n := range len(m) {
		checkInstrument(t, rt, m[:n])
	}
}

// TestInstrumentFuzzRegressions replays the inputs kept in
// testdata/instrument, each one that once broke the rewriter.
func TestInstrumentFuzzRegressions(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "instrument", "*.wasm"))
	rt := wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(context.Background())
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkInstrument(t, rt, b)
		})
	}
}

// TestLoadRecoversCompilerPanic: a module on which wazero's validator
// panics (found by FuzzInstrument) is refused, not a crash of the host.
func TestLoadRecoversCompilerPanic(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join("testdata", "instrument", "call-type-out-of-range.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{{}, {DisablePreemption: true}} {
		if _, err := loadGuest(t, context.Background(), wasm, cfg); !errors.Is(err, ErrInvalidModule) {
			t.Fatalf("err = %v, want ErrInvalidModule", err)
		}
	}
}

// TestLoadRefusesHugeDeclaredCount: a hundred-byte module declaring a table
// section of 150 million entries (found by FuzzInstrument, which it stalled
// for seconds) is refused before wazero allocates the entries.
func TestLoadRefusesHugeDeclaredCount(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join("testdata", "instrument", "huge-table-count.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := loadGuest(t, context.Background(), wasm, Config{}); !errors.Is(err, ErrInvalidModule) {
		t.Fatalf("err = %v, want ErrInvalidModule", err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
		t.Fatalf("refusing a %d-byte module allocated %d MiB", len(wasm), d>>20)
	}
}

// typedParamModule is a plain module with one more type, whose parameter
// is a (ref null 2): read as one byte per parameter, its heap type would
// be taken for the count of results.
func typedParamModule() []byte {
	m := guestModule(guestSpec{})
	r := reader{b: m, i: 8}
	start := r.i
	r.byte()
	types := r.bytes(int(r.u32()))
	body := append([]byte{types[0] + 1}, types[1:]...)
	body = append(body, 0x60, 1, 0x63, 0x02, 1, 0x7f)
	return append(wsection(slices.Clone(m[:start]), 1, body), m[r.i:]...)
}
