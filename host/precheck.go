package host

import "fmt"

// checkCounts refuses a module whose sections declare more entries than
// their bytes can hold. wazero's decoder allocates a section's entries by
// the declared count before reading them, so without this check an upload
// of a hundred bytes declaring a table section of 150 million entries makes
// the host allocate gigabytes (testdata/instrument/huge-table-count.wasm,
// found by FuzzInstrument). Every entry of the vector sections takes at
// least one byte; a malformed module otherwise passes through to the
// compiler, which says what is wrong.
func checkCounts(wasm []byte) error {
	if len(wasm) < 8 {
		return nil
	}
	r := reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil
		}
		switch id {
		case 1, 2, 3, 4, 5, 6, 7, 9, 10, 11:
			sr := reader{b: body}
			if n := sr.u32(); sr.err == nil && uint64(n) > uint64(len(body)) {
				return fmt.Errorf("section %d declares %d entries in %d bytes", id, n, len(body))
			}
		}
	}
	return nil
}
