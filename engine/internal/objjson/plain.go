package objjson

import (
	"encoding/binary"
	"unsafe"
)

// Strings dominate the documents the engine reads and writes (a 1 KiB
// object is mostly the values of its annotations and spec), and each of
// Decode, Scanner, Append and the API's depth check used to look at them a
// byte at a time. Plain and plainHTML find the run of bytes that need no
// attention eight bytes at a time (SWAR: bit tricks on a uint64), and the
// callers look at the byte that ends the run as before.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasByte has the high bit set in each byte of x equal to c's (and maybe
// in a byte above one that is: callers only test for zero).
func hasByte(x uint64, c byte) uint64 {
	v := x ^ (ones * uint64(c))
	return (v - ones) &^ v & highs
}

// special has a bit set when a byte of x is below 0x20 (a control
// character), 0x80 or above (not ASCII), '"' or '\\'.
func special(x uint64) uint64 {
	return (x | (x - ones*0x20) | hasByte(x, '"') | hasByte(x, '\\')) & highs
}

// Plain returns how many bytes at the start of b are printable ASCII other
// than '"' and '\\': the bytes that stand for themselves inside a JSON
// string, and of which none ends one.
func Plain(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if special(binary.LittleEndian.Uint64(b[i:])) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// plainHTML is Plain for a string, also stopping at '<', '>' and '&',
// which encoding/json escapes.
func plainHTML(s string) int {
	b := unsafe.Slice(unsafe.StringData(s), len(s)) // read only
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// '"' and '&' differ in bit 2 only, '<' and '>' in bit 1 only: one
		// test each finds either of a pair.
		if (x|(x-ones*0x20)|hasByte(x|ones*0x04, '&')|hasByte(x|ones*0x02, '>')|hasByte(x, '\\'))&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			break
		}
	}
	return i
}
