package serving

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
)

// tokenBytes is the admin token's entropy: 256 bits.
const tokenBytes = 32

// NewToken returns a fresh random bearer token (base64url, no padding).
func NewToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ensureToken reads DIR/admin.token, creating it on first start.
func ensureToken(dir string) (string, error) {
	path := filepath.Join(dir, tokenFile)
	b, err := readIfExists(path)
	if err != nil {
		return "", err
	}
	if b != nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			return "", fmt.Errorf("%w: %s is empty or holds whitespace", ErrBadMaterial, path)
		}
		return tok, nil
	}
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, []byte(tok+"\n")); err != nil {
		return "", err
	}
	return tok, nil
}
