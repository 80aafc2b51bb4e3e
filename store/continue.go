package store

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// Continue tokens, as every backend writes them: base64url of a version
// byte (1), the list's revision as a uvarint, then the key the next page
// starts at (inclusive). A token names its revision, so a continued list
// reads at the revision of its first page.
const continueVersion = 1

// EncodeContinue is the token of a page of a list at rev that goes on at
// nextKey.
func EncodeContinue(rev int64, nextKey string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(nextKey))
	b = append(b, continueVersion)
	b = binary.AppendUvarint(b, uint64(rev))
	b = append(b, nextKey...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeContinue reads a token EncodeContinue made for a list of the keys
// under prefix. A token that does not parse, names no positive revision or
// a key outside prefix gives ErrInvalidContinue.
func DecodeContinue(token, prefix string) (rev int64, nextKey string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 2 || b[0] != continueVersion {
		return 0, "", ErrInvalidContinue
	}
	r, n := binary.Uvarint(b[1:])
	if n <= 0 || r == 0 || r > 1<<62 {
		return 0, "", ErrInvalidContinue
	}
	k := string(b[1+n:])
	if !strings.HasPrefix(k, prefix) {
		return 0, "", ErrInvalidContinue
	}
	return int64(r), k, nil
}
