package host

import (
	"errors"
	"testing"
)

// FuzzVetModule: vetting reads untrusted bytes; whatever they are, it
// returns without panicking, and a module it accepts fits the limits it
// measured against.
func FuzzVetModule(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	l := VetLimits{MaxNesting: 8, MaxFunctions: 16, MaxFunctionBytes: 256, MaxLocals: 64, MaxTableElements: 100, MaxGlobals: 16, MaxNestingWork: 64}.withDefaults()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		sh, err := vetModule(wasm, l)
		if err != nil {
			if !errors.Is(err, errVet) {
				t.Fatalf("an error that does not wrap errVet: %v", err)
			}
			return
		}
		if sh.MaxNesting > l.MaxNesting || sh.MaxBody > l.MaxFunctionBytes || sh.MaxLocals > l.MaxLocals ||
			sh.Functions > l.MaxFunctions || sh.Globals > l.MaxGlobals || sh.NestingWork > l.MaxNestingWork || sh.Tables > maxTables {
			t.Fatalf("accepted a module past the limits: %+v", sh)
		}
	})
}
