package store_test

import (
	"errors"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
)

// FuzzDecodeContinue: any token either decodes to a positive revision and a
// key under the prefix that encode gives back, or fails with
// ErrInvalidContinue.
func FuzzDecodeContinue(f *testing.F) {
	f.Add(store.EncodeContinue(7, "/g/r/ns/a\x00"), "/g/r/")
	f.Add(store.EncodeContinue(1, "/x"), "")
	f.Add("AA", "/g/")
	f.Add("AQ", "")
	f.Add("not a token!", "")
	f.Fuzz(func(t *testing.T, token, prefix string) {
		rev, key, err := store.DecodeContinue(token, prefix)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidContinue) {
				t.Fatalf("error %v is not ErrInvalidContinue", err)
			}
			return
		}
		if rev <= 0 || len(key) < len(prefix) || key[:len(prefix)] != prefix {
			t.Fatalf("accepted revision %d, key %q for prefix %q", rev, key, prefix)
		}
		r2, k2, err := store.DecodeContinue(store.EncodeContinue(rev, key), prefix)
		if err != nil || r2 != rev || k2 != key {
			t.Fatalf("round trip of (%d, %q): (%d, %q, %v)", rev, key, r2, k2, err)
		}
	})
}
