package host

import (
	"encoding/binary"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Hand-assembled native-ABI modules for the rewriter's tests: each shape a
// hostile guest could use is a few bytes of code, assembled here rather
// than committed as a blob.

func leb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func wname(b []byte, s string) []byte { return append(leb(b, uint64(len(s))), s...) }

func wsection(m []byte, id byte, body []byte) []byte {
	return append(leb(append(m, id), uint64(len(body))), body...)
}

// wbody encodes a function body: locals i32 locals, then code and end.
func wbody(locals int, code []byte) []byte {
	b := []byte{0}
	if locals > 0 {
		b = leb([]byte{1}, uint64(locals))
		b = append(b, 0x7f)
	}
	b = append(append(b, code...), 0x0b)
	return append(leb(nil, uint64(len(b))), b...)
}

// wbodyDecls encodes a function body whose local declarations are given
// as raw bytes (the group count first).
func wbodyDecls(decls, code []byte) []byte {
	b := append(append(append([]byte{}, decls...), code...), 0x0b)
	return append(leb(nil, uint64(len(b))), b...)
}

// guestOK is the document reconcile returns when it does not spin.
const guestOK = `{"status":{}}`

// guestSpec describes a module built by guestModule. Its functions are:
// 0 wasi_snapshot_preview1.sched_yield (unless noYield), 1
// setpoint_abi_version, 2 setpoint_alloc, 3 reconcile (i32, i32) -> i64
// with one i32 local (2), then extra, each () -> () with one i32 local (0).
type guestSpec struct {
	noYield    bool
	yieldNoRet bool   // import sched_yield as () -> () instead of () -> i32
	globals    int    // defined mutable i32 globals
	reconcile  []byte // reconcile's code; it must leave an i64
	// reconcileLocals replaces reconcile's local declarations (raw, the
	// group count first); reconcile's code must then not use local 2.
	reconcileLocals []byte
	version         []byte // setpoint_abi_version's code, default i32.const abi.Version
	extra           [][]byte
	exports         []byte // more raw export entries
	nexports        int
	start           int // 1 + index of the start function, or 0
	// table adds a funcref table holding the extra functions (table
	// index i is function 4+i), set by an element section, for
	// call_indirect with type 3.
	table bool
	// custom adds a custom section of that name (and a few bytes) after
	// the code section.
	custom string
}

// spinUnless is reconcile code that returns guestOK at once when the input
// is shorter than 1,000 bytes and runs spin otherwise; spin must leave the
// stack empty.
func spinUnless(spin []byte) []byte {
	c := []byte{0x20, 0x01, 0x41}
	c = appendSleb(c, 1000)
	c = append(c, 0x49, 0x04, 0x40, 0x42) // i32.lt_u if i64.const
	c = appendSleb(c, int64(2048)<<32|int64(len(guestOK)))
	c = append(c, 0x0f, 0x0b) // return end
	c = append(c, spin...)
	return append(c, 0x42, 0x00) // i64.const 0
}

func guestModule(s guestSpec) []byte {
	const i32, i64 = 0x7f, 0x7e
	m := []byte("\x00asm\x01\x00\x00\x00")
	// Types: 0 () -> i32, 1 (i32) -> i32, 2 (i32, i32) -> i64, 3 () -> ().
	m = wsection(m, 1, []byte{4, 0x60, 0, 1, i32, 0x60, 1, i32, 1, i32, 0x60, 2, i32, i32, 1, i64, 0x60, 0, 0})
	first := 1
	if s.noYield {
		first = 0
	} else {
		typ := byte(0)
		if s.yieldNoRet {
			typ = 3
		}
		imp := wname(wname([]byte{1}, "wasi_snapshot_preview1"), "sched_yield")
		m = wsection(m, 2, append(imp, 0x00, typ))
	}
	funcs := leb(nil, uint64(3+len(s.extra)))
	funcs = append(funcs, 0, 1, 2)
	for range s.extra {
		funcs = append(funcs, 3)
	}
	m = wsection(m, 3, funcs)
	if s.table {
		m = wsection(m, 4, append([]byte{1, 0x70, 0}, leb(nil, uint64(len(s.extra)))...))
	}
	m = wsection(m, 5, []byte{1, 0x00, 1}) // memory: min 1 page
	if s.globals > 0 {
		g := leb(nil, uint64(s.globals))
		for range s.globals {
			g = append(g, i32, 1, 0x41, 0, 0x0b)
		}
		m = wsection(m, 6, g)
	}
	ex := leb(nil, uint64(4+s.nexports))
	ex = append(wname(ex, "memory"), 2, 0)
	ex = append(wname(ex, abi.ExportVersion), 0, byte(first))
	ex = append(wname(ex, abi.ExportAlloc), 0, byte(first+1))
	ex = append(wname(ex, abi.ExportReconcile), 0, byte(first+2))
	m = wsection(m, 7, append(ex, s.exports...))
	if s.start > 0 {
		m = wsection(m, 8, leb(nil, uint64(s.start-1)))
	}
	if s.table {
		el := append([]byte{1, 0, 0x41, 0, 0x0b}, leb(nil, uint64(len(s.extra)))...)
		for i := range s.extra {
			el = leb(el, uint64(4+i))
		}
		m = wsection(m, 9, el)
	}
	version := s.version
	if version == nil {
		version = appendSleb([]byte{0x41}, int64(abi.Version))
	}
	code := leb(nil, uint64(3+len(s.extra)))
	code = append(code, wbody(0, version)...)
	code = append(code, wbody(0, appendSleb([]byte{0x41}, 1024))...)
	reconcile := s.reconcile
	if reconcile == nil {
		reconcile = spinUnless(nil)
	}
	if s.reconcileLocals != nil {
		code = append(code, wbodyDecls(s.reconcileLocals, reconcile)...)
	} else {
		code = append(code, wbody(1, reconcile)...)
	}
	for _, e := range s.extra {
		code = append(code, wbody(1, e)...)
	}
	m = wsection(m, 10, code)
	if s.custom != "" {
		// As a name section: the module's name, and the name of
		// reconcile's local 2.
		body := append(wname(nil, s.custom), 0x00, 0x06)
		body = wname(body, "guest")
		locals := wname([]byte{1, 3, 1, 2}, "n")
		body = append(append(body, 0x02, byte(len(locals))), locals...)
		m = wsection(m, 0, body)
	}
	data := appendSleb([]byte{1, 0, 0x41}, 2048)
	data = wname(append(data, 0x0b), guestOK)
	return wsection(m, 11, data)
}

// Spinning shapes, as reconcile code (spinUnless) and extra functions.
var (
	// nestedLoops: an outer loop around an inner loop of 100,000 turns.
	nestedLoops = append(append([]byte{0x03, 0x40, 0x41, 0x00, 0x21, 0x02, // loop; local 2 = 0
		0x03, 0x40, 0x20, 0x02, 0x41, 0x01, 0x6a, 0x22, 0x02, 0x41}, // loop; local 2 += 1
		appendSleb(nil, 100000)...),
		0x49, 0x0d, 0x00, 0x0b, // lt_u br_if 0 end
		0x0c, 0x00, 0x0b) // br 0 end
	// brTableLoop: a loop continued by br_table rather than br.
	brTableLoop = []byte{0x02, 0x40, 0x03, 0x40, 0x41, 0x00, 0x0e, 0x01, 0x00, 0x01, 0x0b, 0x0b}
	// callInLoop: a loop calling function 4 (extra[0]).
	callInLoop = []byte{0x03, 0x40, 0x10, 0x04, 0x0c, 0x00, 0x0b}
	// countedLoop: a loop of 1,000 turns, for a function ()->() with local 0.
	countedLoop = []byte{0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, 0x41, 0xe8, 0x07, 0x49, 0x0d, 0x00, 0x0b}
	// spinLoop: a loop that never ends.
	spinLoop = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}
)

// callTree returns depth functions (indices 4 on) without a single loop:
// each calls the next twice and the last runs straight-line code of n
// instructions pairs, so calling function 4 runs 2^(depth-1) leaves.
func callTree(depth, n int) [][]byte {
	var fs [][]byte
	for i := range depth - 1 {
		next := leb(nil, uint64(4+i+1))
		fs = append(fs, append(append([]byte{0x10}, next...), append([]byte{0x10}, next...)...))
	}
	var leaf []byte
	for range n {
		leaf = append(leaf, 0x41, 0x01, 0x1a) // i32.const 1 drop
	}
	return append(fs, leaf)
}

// More spinning shapes.
var (
	// brIfLoop: a loop continued by br_if.
	brIfLoop = []byte{0x03, 0x40, 0x41, 0x01, 0x0d, 0x00, 0x0b}
	// multiValueLoop: a loop of type 1, (i32) -> i32, continued with its
	// parameter on the stack.
	multiValueLoop = []byte{0x41, 0x07, 0x03, 0x01, 0x0c, 0x00, 0x0b, 0x1a}
	// callIndirectLoop: a loop calling table entry 0 (type 3).
	callIndirectLoop = []byte{0x03, 0x40, 0x41, 0x00, 0x11, 0x03, 0x00, 0x0c, 0x00, 0x0b}
)

// localGroups declares groups groups of n i32 locals each, as raw local
// declarations.
func localGroups(groups, n int) []byte {
	b := leb(nil, uint64(groups))
	for range groups {
		b = append(leb(b, uint64(n)), 0x7f)
	}
	return b
}

// longShortLoop is a loop of 15 turns, each of ops loads and stores, for
// a function ()->() with local 0.
func longShortLoop(ops int) []byte {
	c := []byte{0x03, 0x40}
	for i := range ops {
		o := byte(i % 120)
		c = append(c, 0x41, 0x00, 0x41, 0x00, 0x28, 0x02, o, 0x36, 0x02, o+4) // i32.store offset=o+4 (i32.load offset=o)
	}
	return append(c, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, 0x41, 0x0f, 0x49, 0x0d, 0x00, 0x0b)
}
