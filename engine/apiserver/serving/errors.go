package serving

import "errors"

var (
	// ErrNoDataDir is returned when the data directory is not set.
	ErrNoDataDir = errors.New("serving: data directory not set")
	// ErrCertKeyPair is returned when only one of the certificate and key
	// files is given.
	ErrCertKeyPair = errors.New("serving: a certificate file needs its key file and the other way round")
	// ErrBadMaterial is returned when a file in the data directory cannot be
	// used (corrupt PEM, a key that does not match, an empty token).
	ErrBadMaterial = errors.New("serving: unusable security material")
	// ErrBadTokenFile is returned when a static token file does not parse.
	ErrBadTokenFile = errors.New("serving: bad token file")
	// ErrNoSigningCA is returned when client certificates are asked of a
	// server that has no CA of its own (it serves the user's certificate).
	ErrNoSigningCA = errors.New("serving: no CA of the server's own to sign client certificates with")
)
