package host_test

// tinyModule assembles a minimal native-ABI module by hand: it exports a
// one-page memory, setpoint_abi_version returning version, setpoint_alloc
// returning 1024, and reconcile returning the packed result packed; output
// holds the document placed at offset 2048. It compiles in milliseconds,
// which keeps tests of the cache and of ABI edge cases cheap even under the
// race detector.
func tinyModule(version int32, packed uint64, output string) []byte {
	return nativeModule(nil, version, packed, output)
}

// nativeModule is tinyModule that also imports each of imports from the
// setpoint module with the host-call signature (i32, i32, i32, i32) -> i32,
// without calling them.
func nativeModule(imports []string, version int32, packed uint64, output string) []byte {
	leb := func(b []byte, v uint64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	sleb := func(b []byte, v int64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
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
	if len(imports) > 0 {
		im := leb(nil, uint64(len(imports)))
		for _, f := range imports {
			im = append(name(name(im, "setpoint"), f), 0, 3)
		}
		m = section(m, 2, im)
	}
	m = section(m, 3, []byte{3, 0, 1, 2}) // functions
	m = section(m, 5, []byte{1, 0x00, 1}) // memory: min 1 page
	n := uint64(len(imports))             // imported functions come first in the index space
	exports := []byte{4}
	exports = append(name(exports, "memory"), 2, 0)
	exports = leb(append(name(exports, "setpoint_abi_version"), 0), n)
	exports = leb(append(name(exports, "setpoint_alloc"), 0), n+1)
	exports = leb(append(name(exports, "reconcile"), 0), n+2)
	m = section(m, 7, exports)
	body := func(instr []byte) []byte {
		return append(leb(nil, uint64(len(instr)+2)), append(append([]byte{0}, instr...), 0x0b)...)
	}
	code := []byte{3}
	code = append(code, body(sleb([]byte{0x41}, int64(version)))...)
	code = append(code, body(sleb([]byte{0x41}, 1024))...)
	code = append(code, body(sleb([]byte{0x42}, int64(packed)))...)
	m = section(m, 10, code)
	data := []byte{1, 0, 0x41}
	data = sleb(data, 2048)
	data = append(data, 0x0b)
	data = name(data, output)
	m = section(m, 11, data)
	return m
}

// packResult packs an output region as the native ABI does.
func packResult(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }
