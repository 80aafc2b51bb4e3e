package encrypt_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/encrypt"
)

// BenchmarkSecretGet reads a 1 KiB Secret through the wrapper with each
// provider (the decryption on every read), against a Badger store without
// the wrapper as the baseline of the run. Writes are left out: their sync
// to disk dwarfs the encryption.
func key(i int) string { return store.ObjectKey("", "secrets", "default", fmt.Sprintf("s%d", i)) }

func BenchmarkSecretGet(b *testing.B) {
	doc := []byte(`{"apiVersion":"v1","data":{"k":"` + strings.Repeat("QUJD", 256) + `"},"kind":"Secret","metadata":{"name":"s"}}`)
	providers := []struct{ name, provider string }{
		{"baseline", ""},
		{"identity", identity},
		{"aescbc", aes("aescbc", "k", key1)},
		{"aesgcm", aes("aesgcm", "k", key1)},
		{"secretbox", aes("secretbox", "k", key1)},
	}
	for _, p := range providers {
		b.Run(p.name, func(b *testing.B) {
			ctx := context.Background()
			inner := openBadger(b, b.TempDir())
			var st store.Store = inner
			if p.provider != "" {
				st = encrypt.New(inner, load(b, writeConfig(b, "secrets", p.provider)))
			}
			defer st.Close()
			const n = 64
			for i := range n {
				if _, err := st.Create(ctx, key(i), doc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			i := 0
			for b.Loop() {
				if _, err := st.Get(ctx, key(i%n), store.GetOptions{}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
