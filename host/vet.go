package host

import (
	"errors"
	"fmt"
)

// Vetting bounds what an untrusted module may cost before the compiler sees
// it. wazero's compiler is fast on what toolchains emit but its memory and
// time grow with the shape of a function, not only its size: a 3 MB module
// of a million nested loops made it allocate over 6 GB, and 600 KB of
// 200,000 nested blocks kept a core busy for minutes. vetModule is one pass
// over the module's sections and code that reads counts and nesting without
// building anything, and refuses a module past VetLimits. It runs in
// linear time and constant memory in the module's size.

// VetLimits are the structural limits a module must fit before it is
// compiled. Zero values get the defaults (docs/RATIONALE.md says why each).
type VetLimits struct {
	// MaxFunctions bounds the functions a module defines and imports.
	// Default 100,000 (a Go guest has about 3,000 to 6,000).
	MaxFunctions int
	// MaxFunctionBytes bounds one function body. Default 1 MiB.
	MaxFunctionBytes int
	// MaxNesting bounds the depth of nested blocks, loops and ifs in one
	// function. Default 2,000 (Go guests reach about 300).
	MaxNesting int
	// MaxNestingWork bounds the sum, over every block, loop and if of the
	// module, of its depth: what the compiler's time grows with. Default
	// 32,000,000 (Go guests: about 2,000,000).
	MaxNestingWork int64
	// MaxLocals bounds the locals of one function. Default 50,000, as
	// browsers' engines bound them.
	MaxLocals int
	// MaxTableElements bounds a table's declared initial size and the
	// number of tables. Default 1,000,000 elements, 10 tables.
	MaxTableElements int
	// MaxGlobals bounds the globals a module defines and imports. Default
	// 100,000.
	MaxGlobals int
}

func (l VetLimits) withDefaults() VetLimits {
	if l.MaxFunctions <= 0 {
		l.MaxFunctions = 100_000
	}
	if l.MaxFunctionBytes <= 0 {
		l.MaxFunctionBytes = 1 << 20
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = 2000
	}
	if l.MaxNestingWork <= 0 {
		l.MaxNestingWork = 32_000_000
	}
	if l.MaxLocals <= 0 {
		l.MaxLocals = 50_000
	}
	if l.MaxTableElements <= 0 {
		l.MaxTableElements = 1_000_000
	}
	if l.MaxGlobals <= 0 {
		l.MaxGlobals = 100_000
	}
	return l
}

// maxTables bounds the tables a module declares (the reference-types
// proposal allows several; toolchains emit one).
const maxTables = 10

// errVet says why a module is refused before compiling; vetModule's errors
// wrap it.
var errVet = errors.New("module exceeds a structural limit")

// moduleShape is what vetting measured, for errors and tests.
type moduleShape struct {
	Functions, Globals, Tables     int
	MaxBody, MaxNesting, MaxLocals int
	CodeBytes                      int
	// NestingWork is the sum, over every block, loop and if, of its depth.
	NestingWork int64
	// MemoryMin is the declared initial memory in pages, -1 when the
	// module declares none.
	MemoryMin int64
}

// vetModule measures wasm and refuses it past l. Bytes it cannot decode are
// left to the compiler, which says what is wrong with them, except in the
// code section, whose every instruction is decoded here: an opcode this
// host does not know refuses the module.
func vetModule(wasm []byte, l VetLimits) (moduleShape, error) {
	sh := moduleShape{MemoryMin: -1}
	if len(wasm) < 8 {
		return sh, nil
	}
	refuse := func(format string, args ...any) (moduleShape, error) {
		return sh, fmt.Errorf("%w: "+format, append([]any{errVet}, args...)...)
	}
	r := reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return sh, nil
		}
		sr := reader{b: body}
		switch id {
		case 2: // imports
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				sr.bytes(int(sr.u32()))
				sr.bytes(int(sr.u32()))
				switch sr.byte() {
				case 0x00:
					sr.u32()
					sh.Functions++
				case 0x01:
					sr.byte()
					sh.Tables++
					if min := sr.limitsMin(); min > uint64(l.MaxTableElements) {
						return refuse("an imported table of %d elements exceeds the limit of %d", min, l.MaxTableElements)
					}
				case 0x02:
					sh.MemoryMin = int64(sr.limitsMin())
				case 0x03:
					sr.byte()
					sr.byte()
					sh.Globals++
				default:
					sr.fail()
				}
			}
		case 3: // functions
			sh.Functions += int(sr.u32())
		case 4: // tables
			n := sr.u32()
			sh.Tables += int(n)
			if sh.Tables > maxTables {
				return refuse("%d tables exceed the limit of %d", sh.Tables, maxTables)
			}
			for i := uint32(0); i < n && sr.err == nil; i++ {
				sr.byte()
				if min := sr.limitsMin(); min > uint64(l.MaxTableElements) {
					return refuse("table %d declares %d elements; the limit is %d", i, min, l.MaxTableElements)
				}
			}
		case 5: // memories
			if n := sr.u32(); n > 1 {
				return refuse("%d memories declared; a module may have one", n)
			} else if n == 1 {
				sh.MemoryMin = int64(sr.limitsMin())
			}
		case 6: // globals
			sh.Globals += int(sr.u32())
		case 10: // code
			sh.CodeBytes = len(body)
			if err := vetCode(body, l, &sh); err != nil {
				return sh, err
			}
		}
		switch {
		case sh.Functions > l.MaxFunctions:
			return refuse("%d functions exceed the limit of %d", sh.Functions, l.MaxFunctions)
		case sh.Globals > l.MaxGlobals:
			return refuse("%d globals exceed the limit of %d", sh.Globals, l.MaxGlobals)
		case sh.Tables > maxTables:
			return refuse("%d tables exceed the limit of %d", sh.Tables, maxTables)
		}
	}
	return sh, nil
}

// vetCode walks every function body: its size, its locals and the depth of
// its blocks.
func vetCode(body []byte, l VetLimits, sh *moduleShape) error {
	r := reader{b: body}
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if int64(n) > int64(l.MaxFunctions) {
		return fmt.Errorf("%w: the code section holds %d functions; the limit is %d", errVet, n, l.MaxFunctions)
	}
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err == nil && int64(size) > int64(l.MaxFunctionBytes) {
			return fmt.Errorf("%w: function %d is %d bytes; the limit is %d", errVet, i, size, l.MaxFunctionBytes)
		}
		code := r.bytes(int(size))
		if r.err != nil {
			return nil // truncated: the compiler says so
		}
		sh.MaxBody = max(sh.MaxBody, int(size))
		if err := vetFunc(code, l, sh); err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
	}
	return nil
}

func vetFunc(code []byte, l VetLimits, sh *moduleShape) error {
	r := reader{b: code}
	groups := r.u32()
	var locals uint64
	for i := uint32(0); i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		r.byte()
		if locals > uint64(l.MaxLocals) {
			return fmt.Errorf("%w: more than %d locals", errVet, l.MaxLocals)
		}
	}
	sh.MaxLocals = max(sh.MaxLocals, int(locals))
	depth := 1 // the function's own block
	for r.i < len(r.b) && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			r.blockType()
			depth++
			if depth > l.MaxNesting {
				return fmt.Errorf("%w: blocks nested deeper than %d", errVet, l.MaxNesting)
			}
			sh.NestingWork += int64(depth)
			if sh.NestingWork > l.MaxNestingWork {
				return fmt.Errorf("%w: the nesting work of its blocks (the sum of their depths) exceeds %d", errVet, l.MaxNestingWork)
			}
			sh.MaxNesting = max(sh.MaxNesting, depth)
		case op == 0x0b: // end
			depth--
		case op == 0x0c || op == 0x0d: // br, br_if
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			if int(n) > len(r.b)-r.i {
				r.fail()
			}
			for j := uint32(0); j <= n && r.err == nil; j++ {
				r.u32()
			}
		case op == 0x10 || op == 0x12: // call, return_call
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			r.bytes(int(r.u32()))
		case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e:
			r.memarg()
		case op == 0x3f || op == 0x40:
			r.u32()
		case op == 0x41 || op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xd0:
			r.byte()
		case op == 0xd2:
			r.u32()
		case op == 0xfc:
			switch sub := r.u32(); {
			case sub <= 7:
			case sub == 8, sub == 10, sub == 12, sub == 14:
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
				r.u32()
			default:
				return fmt.Errorf("%w: unknown instruction 0xfc %d", errVet, sub)
			}
		case op == 0xfd: // SIMD
			switch sub := r.u32(); {
			case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads and stores
				r.memarg()
			case sub == 0x0c || sub == 0x0d: // v128.const, i8x16.shuffle
				r.bytes(16)
			case sub >= 0x15 && sub <= 0x22: // lane extract and replace
				r.byte()
			case sub >= 0x54 && sub <= 0x5b: // lane loads and stores
				r.memarg()
				r.byte()
			}
		case op <= 0x01, op == 0x05, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4:
		default:
			return fmt.Errorf("%w: unknown instruction 0x%02x", errVet, op)
		}
	}
	return nil
}

// limitsMin reads limits and returns the minimum.
func (r *reader) limitsMin() uint64 {
	flags := r.byte()
	min := r.u32()
	if flags&1 != 0 {
		r.u32()
	}
	return uint64(min)
}
