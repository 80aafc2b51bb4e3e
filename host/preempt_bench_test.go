package host

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkInstrument rewrites the widget guest (about 2.5 MB), the cost
// the rewriter adds to a load.
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join("..", "bin", "wasm", "widget.wasm"))
	if err != nil {
		b.Skip("bin/wasm/widget.wasm is not built (make plugins)")
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}
