package serviceaccount

import "errors"

// Errors of the package. None of them quotes a token or a key.
var (
	// ErrBadKeys is a stored key record that cannot be read.
	ErrBadKeys = errors.New("serviceaccount: the stored signing keys are unreadable")
	// ErrUnknownKey is a token signed by no key the server holds.
	ErrUnknownKey = errors.New("serviceaccount: the token is signed by an unknown key")
	// ErrInvalidToken is a token of this issuer that does not verify:
	// bad signature, expired, not yet valid, malformed claims.
	ErrInvalidToken = errors.New("serviceaccount: invalid token")
	// ErrAudience is a token for none of the server's audiences.
	ErrAudience = errors.New("serviceaccount: the token's audiences are not accepted by this server")
	// ErrAccountGone is a token whose ServiceAccount no longer exists, or
	// exists again with another UID.
	ErrAccountGone = errors.New("serviceaccount: the token's ServiceAccount no longer exists")
	// ErrNotSynced is a token checked before the ServiceAccount cache has
	// loaded.
	ErrNotSynced = errors.New("serviceaccount: the ServiceAccount cache is not loaded yet")
)
