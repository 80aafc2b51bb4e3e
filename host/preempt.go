package host

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Preemption of native-ABI guests.
//
// wazero's close-on-context-done makes every loop iteration of the guest
// leave compiled code to check whether the module was closed; Go guests run
// a loop per non-leaf function call, so it multiplies the cost of a call
// several times. Instead, the host rewrites each native-ABI module once, at
// load. It adds two mutable i32 globals, $stop (exported as stopGlobal) and
// $count, and at the entry of every function it inserts (with 1, or
// loopBatch in a function with loops, for d)
//
//	count = count - d
//	if count <= 0 {
//		count = yieldEvery
//		call wasi_snapshot_preview1.sched_yield   ;; leaves compiled code
//		if stop { unreachable }
//	}
//
// At the head of every loop it counts in a local of the function instead,
// $n (added to each function), and takes loopBatch off $count once per
// loopBatch iterations:
//
//	n = n + 1
//	if n & (loopBatch-1) == 0 {
//		count = count - loopBatch
//		if count <= 0 { ...as above... }
//	}
//
// A global lives in memory, so a countdown in it is a load and a store,
// and each iteration waits on the previous one's store; the local stays
// in a register. Go guests branch back to their function's loop head at
// every jump, about 2,600 times in one Widget reconcile call, so the local
// count took about 7% off that call. The iterations of a call that end
// short of a batch (fewer than loopBatch) go uncounted, so the entry of a
// function with loops takes a whole batch off $count rather than one: a
// caller looping over a function of 15 long turns would otherwise run
// 15 turns per count, and overrun its deadline (and stall the garbage
// collector) fifteen times as long. When a call's context is done
// the host sets $stop and the guest traps within about yieldEvery loop
// iterations or calls; without loops and calls a function runs at most
// its own length, so the deadline holds. The periodic
// host call matters as much as the flag: compiled guest code cannot be
// preempted by the Go scheduler, so a guest that never left it would stall
// every stop-the-world phase of the garbage collector, and with it the
// goroutine that is to set $stop. A trapped instance is discarded.
//
// The guest cannot reach the injected globals: the rewriter refuses a
// module whose code or exports name their indices, and the export of $stop
// is visible only to the host, since every plugin version has a wazero
// runtime of its own and nothing there imports from the guest.
//
// The yield uses the module's own import of sched_yield (Go's wasip1
// runtime always imports it), so no function index shifts. Modules without
// it, with a start function (it runs at instantiation, before the host can
// reach $stop) or with anything the rewriter cannot decode fall back to
// wazero's close-on-context-done. Decoding must agree with the compiler's
// byte for byte: an immediate read here with the wrong length would make
// the rest of the body read as other instructions, and a loop opcode read
// as an immediate gets no check. So the rewriter refuses, rather than
// skips, what it does not know, typed references ((ref null $t), two or
// more bytes where other value types take one) included.

// yieldEvery is the number of loop iterations between two checks of $stop.
const yieldEvery = 1000

// loopBatch is the number of loop iterations a function counts in its
// own local before it takes them off $count; a power of two.
const loopBatch = 16

// stopGlobal is the export name of the injected global.
const stopGlobal = "setpoint_stop"

// errUninstrumentable says the rewriter met something it cannot decode.
var errUninstrumentable = errors.New("cannot instrument module")

// maxGlobals is wazero's limit on a module's globals; the rewriter adds two.
const maxGlobals = 1 << 27

// instrument returns wasm with the stop global and the checks. It parses
// untrusted bytes: it never panics, and it refuses (errUninstrumentable)
// what it cannot rewrite safely, so that the caller falls back to wazero's
// close-on-context-done. In particular it refuses a module that could
// reach the injected globals itself: an instruction or an export naming
// their indices (invalid in the original module, valid once they exist),
// or an export already named stopGlobal. It also refuses a start
// function, which runs at instantiation, before the host can reach $stop.
func instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a Wasm binary", errUninstrumentable)
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := reader{b: wasm, i: 8}
	last := 0
	for r.i < len(r.b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, r.err
		}
		if id != 0 {
			// Known sections, each at most once, in the required order.
			if id > 12 || sectionOrder(id) <= last {
				return nil, fmt.Errorf("%w: section %d unknown, repeated or out of order", errUninstrumentable, id)
			}
			last = sectionOrder(id)
		}
		secs = append(secs, section{id, body})
	}
	// The new globals' indices follow the imported and defined globals.
	importedGlobals, definedGlobals := 0, 0
	hasGlobalSec := false
	yieldIdx := int64(-1)
	var types [][2][]byte
	var exports []byte
	var funcTypeIdx []uint32
	for _, s := range secs {
		switch s.id {
		case 3:
			f, err := funcSection(s.body)
			if err != nil {
				return nil, err
			}
			funcTypeIdx = f
		case 1:
			t, err := funcTypes(s.body)
			if err != nil {
				return nil, err
			}
			types = t
		case 2:
			n, y, err := scanImports(s.body, types)
			if err != nil {
				return nil, err
			}
			importedGlobals, yieldIdx = n, y
		case 6:
			hasGlobalSec = true
			sr := reader{b: s.body}
			definedGlobals = int(sr.u32())
			if sr.err != nil {
				return nil, sr.err
			}
		case 7:
			exports = s.body
		case 8:
			return nil, fmt.Errorf("%w: the module has a start function", errUninstrumentable)
		}
	}
	if yieldIdx < 0 {
		return nil, fmt.Errorf("%w: the module does not import wasi_snapshot_preview1.sched_yield () -> i32", errUninstrumentable)
	}
	if importedGlobals+definedGlobals > maxGlobals-2 {
		return nil, fmt.Errorf("%w: %d globals leave no room for two more", errUninstrumentable, importedGlobals+definedGlobals)
	}
	stopIdx := uint32(importedGlobals + definedGlobals)
	countIdx := stopIdx + 1
	if exports == nil {
		return nil, fmt.Errorf("%w: the module has no export section", errUninstrumentable)
	}
	if err := scanExports(exports, stopIdx); err != nil {
		return nil, err
	}
	// The new globals: mutable i32 $stop = 0 and $count = yieldEvery.
	newGlobals := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}
	newGlobals = appendSleb(newGlobals, yieldEvery)
	newGlobals = append(newGlobals, 0x0b)

	out := append([]byte(nil), wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	globalDone := false
	for _, s := range secs {
		// Sections are ordered; a module without globals gets its global
		// section before the first section that must follow it.
		if !hasGlobalSec && !globalDone && s.id != 0 && sectionOrder(s.id) > sectionOrder(6) {
			emit(6, append([]byte{2}, newGlobals...))
			globalDone = true
		}
		switch s.id {
		case 6:
			body := binary.AppendUvarint(nil, uint64(definedGlobals+2))
			sr := reader{b: s.body}
			sr.u32()
			body = append(body, s.body[sr.i:]...)
			emit(6, append(body, newGlobals...))
			globalDone = true
		case 7:
			sr := reader{b: s.body}
			n := sr.u32()
			if sr.err != nil {
				return nil, sr.err
			}
			body := binary.AppendUvarint(nil, uint64(n)+1)
			body = append(body, s.body[sr.i:]...)
			body = binary.AppendUvarint(body, uint64(len(stopGlobal)))
			body = append(body, stopGlobal...)
			body = append(body, 0x03)
			body = binary.AppendUvarint(body, uint64(stopIdx))
			emit(7, body)
		case 10:
			body, err := instrumentCode(s.body, funcTypeIdx, types, checker{stop: stopIdx, count: countIdx, yield: uint32(yieldIdx)})
			if err != nil {
				return nil, err
			}
			emit(10, body)
		default:
			emit(s.id, s.body)
		}
	}
	if !globalDone {
		return nil, fmt.Errorf("%w: no place for the stop global", errUninstrumentable)
	}
	return out, nil
}

// sectionOrder ranks known sections in the order the format requires.
func sectionOrder(id byte) int {
	switch id {
	case 12: // data count comes between element and code
		return 95
	case 10:
		return 100
	case 11:
		return 110
	}
	return int(id) * 10
}

// funcTypes decodes the type section into parameter and result lists.
func funcTypes(body []byte) ([][2][]byte, error) {
	r := reader{b: body}
	n := r.u32()
	var types [][2][]byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.byte() != 0x60 {
			return nil, fmt.Errorf("%w: unknown type form", errUninstrumentable)
		}
		params := r.valTypes()
		results := r.valTypes()
		types = append(types, [2][]byte{params, results})
	}
	return types, r.err
}

// scanImports counts imported globals and finds the function index of
// wasi_snapshot_preview1.sched_yield with type () -> i32, or -1.
func scanImports(body []byte, types [][2][]byte) (globals int, yield int64, err error) {
	r := reader{b: body}
	n := r.u32()
	funcs := 0
	yield = -1
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := r.bytes(int(r.u32()))
		name := r.bytes(int(r.u32()))
		switch r.byte() {
		case 0x00: // function
			t := r.u32()
			if string(mod) == "wasi_snapshot_preview1" && string(name) == "sched_yield" && int(t) < len(types) &&
				len(types[t][0]) == 0 && string(types[t][1]) == "\x7f" {
				yield = int64(funcs)
			}
			funcs++
		case 0x01: // table: reftype, limits
			r.valType()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global: valtype, mut
			r.byte()
			r.byte()
			globals++
		default:
			return 0, -1, fmt.Errorf("%w: unknown import kind", errUninstrumentable)
		}
	}
	return globals, yield, r.err
}

// scanExports refuses an export named stopGlobal and an export of a global
// at or past index firstNew, the first injected global.
func scanExports(body []byte, firstNew uint32) error {
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.bytes(int(r.u32()))
		kind := r.byte()
		idx := r.u32()
		if r.err != nil {
			break
		}
		if string(name) == stopGlobal {
			return fmt.Errorf("%w: the module already exports %s", errUninstrumentable, stopGlobal)
		}
		if kind == 0x03 && idx >= firstNew {
			return fmt.Errorf("%w: export %q names global %d, which the module does not define", errUninstrumentable, name, idx)
		}
	}
	return r.err
}

// checker builds the checks inserted into each function (see the comment
// at the top of this file).
type checker struct {
	stop, count, yield uint32
}

// global is the countdown of $count by d, with the yield and the stop
// check when it runs out.
func (k checker) global(d int64) []byte {
	g := func(b []byte, op byte, idx uint32) []byte { return binary.AppendUvarint(append(b, op), uint64(idx)) }
	var c []byte
	c = g(c, 0x23, k.count)            // global.get $count
	c = appendSleb(append(c, 0x41), d) // i32.const d
	c = append(c, 0x6b)                // i32.sub
	c = g(c, 0x24, k.count)            // global.set $count
	c = g(c, 0x23, k.count)            // global.get $count
	c = append(c, 0x41, 0x00, 0x4c)    // i32.const 0, i32.le_s
	c = append(c, 0x04, 0x40)          // if
	c = appendSleb(append(c, 0x41), yieldEvery)
	c = g(c, 0x24, k.count)               // global.set $count
	c = g(c, 0x10, k.yield)               // call sched_yield
	c = append(c, 0x1a)                   // drop its errno
	c = g(c, 0x23, k.stop)                // global.get $stop
	c = append(c, 0x04, 0x40, 0x00, 0x0b) // if unreachable end
	return append(c, 0x0b)                // end
}

// entry is the check at the entry of a function without loops.
func (k checker) entry() []byte { return k.global(1) }

// loopEntry is the check at the entry of a function with loops: it pays
// in advance for the iterations the call may end short of a batch. It has
// entry's length, so that it can take its place once the body is read.
func (k checker) loopEntry() []byte { return k.global(loopBatch) }

// loop is the check at a loop head of a function whose counting local is
// n: every loopBatch iterations it takes loopBatch off $count.
func (k checker) loop(n uint32) []byte {
	g := func(b []byte, op byte, idx uint32) []byte { return binary.AppendUvarint(append(b, op), uint64(idx)) }
	var c []byte
	c = g(c, 0x20, n)               // local.get $n
	c = append(c, 0x41, 0x01, 0x6a) // i32.const 1, i32.add
	c = g(c, 0x22, n)               // local.tee $n
	c = appendSleb(append(c, 0x41), loopBatch-1)
	c = append(c, 0x71, 0x45) // i32.and, i32.eqz
	c = append(c, 0x04, 0x40) // if
	c = append(c, k.global(loopBatch)...)
	return append(c, 0x0b) // end
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// funcSection decodes the function section: the type index of each
// function the module defines.
func funcSection(body []byte) ([]uint32, error) {
	r := reader{b: body}
	n := r.u32()
	if r.err == nil && int(n) > len(body) {
		r.fail()
	}
	var idx []uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		idx = append(idx, r.u32())
	}
	return idx, r.err
}

// maxLocals bounds a function's parameters and locals, the counting local
// included; wazero refuses more long before.
const maxLocals = 1 << 27

// instrumentCode rewrites the code section. funcTypeIdx is the type index
// of each defined function (the function section), whose parameters come
// before the locals the code declares.
func instrumentCode(body []byte, funcTypeIdx []uint32, types [][2][]byte, k checker) ([]byte, error) {
	r := reader{b: body}
	n := r.u32()
	if r.err == nil && int(n) != len(funcTypeIdx) {
		return nil, fmt.Errorf("%w: %d function bodies for %d functions", errUninstrumentable, n, len(funcTypeIdx))
	}
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/3), uint64(n))
	entry, loopEntry := k.entry(), k.loopEntry()
	if len(entry) != len(loopEntry) {
		return nil, fmt.Errorf("%w: entry checks of %d and %d bytes", errUninstrumentable, len(entry), len(loopEntry))
	}
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		t := funcTypeIdx[i]
		if int(t) >= len(types) {
			return nil, fmt.Errorf("%w: function %d has type %d of %d", errUninstrumentable, i, t, len(types))
		}
		var err error
		fn, err = instrumentFunc(fn[:0], code, len(types[t][0]), entry, loopEntry, k)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
	}
	return out, nil
}

// instrumentFunc copies one function body with params parameters, adding
// the counting local after its own, inserting entry (loopEntry if the body
// has a loop) at its start and the loop check after the block type of
// every loop. The entry check bounds code without loops: a tree of calls,
// each function calling the next twice, runs 2^depth calls with a shallow
// stack. Instructions naming the injected globals (k.stop and later) or
// the counting local are refused.
func instrumentFunc(out, code []byte, params int, entry, loopEntry []byte, k checker) ([]byte, error) {
	r := reader{b: code}
	groups := r.u32()
	declared := r.i // the local groups start here
	locals := uint64(params)
	for i := uint32(0); i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		r.valType()
		if locals >= maxLocals {
			return nil, fmt.Errorf("%w: more than %d locals", errUninstrumentable, maxLocals)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	counter := uint32(locals)
	out = binary.AppendUvarint(out, uint64(groups)+1)
	out = append(out, code[declared:r.i]...)
	out = append(out, 0x01, 0x7f) // one i32: the counting local
	entryAt := len(out)
	out = append(out, entry...)
	loops := false
	check := k.loop(counter)
	// copied is where the code not yet copied to out starts; runs between
	// loop heads are copied whole.
	copied := r.i
	for r.i < len(r.b) && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
		case op == 0x03: // loop
			r.blockType()
			out = append(out, code[copied:r.i]...)
			out = append(out, check...)
			copied = r.i
			loops = true
		case op == 0x0c || op == 0x0d: // br, br_if
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			for j := uint32(0); j <= n && r.err == nil; j++ {
				r.u32()
			}
		case op == 0x10: // call
			r.u32()
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x12 || op == 0x13:
			// Tail calls can run without bound and without a loop.
			return nil, fmt.Errorf("%w: tail calls", errUninstrumentable)
		case op == 0x1c: // select t*
			r.valTypes()
		case op >= 0x20 && op <= 0x22: // local.get, local.set, local.tee
			if idx := r.u32(); idx >= counter && r.err == nil {
				return nil, fmt.Errorf("%w: an instruction names local %d, which the function does not declare", errUninstrumentable, idx)
			}
		case op == 0x23 || op == 0x24: // global.get, global.set
			if idx := r.u32(); idx >= k.stop && r.err == nil {
				return nil, fmt.Errorf("%w: an instruction names global %d, which the module does not define", errUninstrumentable, idx)
			}
		case op == 0x25 || op == 0x26: // table.get, table.set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41: // i32.const
			r.sleb()
		case op == 0x42: // i64.const
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xd0: // ref.null
			r.valType()
		case op == 0xd2: // ref.func
			r.u32()
		case op == 0xfc:
			switch sub := r.u32(); {
			case sub <= 7: // saturating truncations
			case sub == 8: // memory.init
				r.u32()
				r.u32()
			case sub == 9, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop, elem.drop, table.grow/size/fill
				r.u32()
			case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
				r.u32()
				r.u32()
			case sub == 11: // memory.fill
				r.u32()
			default:
				return nil, fmt.Errorf("%w: opcode 0xfc %d", errUninstrumentable, sub)
			}
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4:
			// no immediates
		default:
			return nil, fmt.Errorf("%w: opcode 0x%02x", errUninstrumentable, op)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if loops {
		copy(out[entryAt:], loopEntry)
	}
	return append(out, code[copied:]...), nil
}

// reader decodes the Wasm binary format; the first error sticks.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated or malformed at byte %d", errUninstrumentable, r.i)
	}
	r.i = len(r.b)
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.fail()
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.fail()
		return nil
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if shift == 28 && c > 0x0f { // past 32 bits
			break
		}
		v |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.fail()
	return 0
}

func (r *reader) sleb() {
	for n := 0; n < 10; n++ {
		if r.byte() < 0x80 {
			return
		}
	}
	r.fail()
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u32()
}

// blockType reads a block type: empty (0x40), a value type, or a type
// index as a non-negative s33 (a first byte of 0x40 to 0x7f with no
// continuation is negative, hence one of the former).
func (r *reader) blockType() {
	if r.i >= len(r.b) {
		r.fail()
		return
	}
	switch c := r.b[r.i]; {
	case c == 0x40:
		r.i++
	case c >= 0x40 && c < 0x80:
		r.valType()
	default:
		r.sleb()
	}
}

// valType reads a value type. Only the one-byte types are decoded: a
// reference type with a heap type ((ref null $t), 0x63 or 0x64 and an
// s33) is refused, so that no immediate the compiler reads as a value
// type is read here as an opcode (wazero accepts them without a feature
// flag).
func (r *reader) valType() byte {
	c := r.byte()
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
		return c
	}
	if r.err == nil {
		r.err = fmt.Errorf("%w: value type 0x%02x at byte %d (typed references are not decoded)", errUninstrumentable, c, r.i-1)
		r.i = len(r.b)
	}
	return 0
}

// valTypes reads a vector of value types, each one byte.
func (r *reader) valTypes() []byte {
	n := r.u32()
	if r.err == nil && int64(n) > int64(len(r.b)-r.i) {
		r.fail()
	}
	start := r.i
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.valType()
	}
	if r.err != nil {
		return nil
	}
	return r.b[start:r.i]
}
