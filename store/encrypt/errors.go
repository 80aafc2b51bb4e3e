package encrypt

import "errors"

var (
	// ErrDecrypt: a stored value could not be decrypted with the providers
	// of the configuration (a key that is not configured, a wrong key, a
	// damaged value). The error names the key of the document, never data.
	ErrDecrypt = errors.New("encrypt: the stored value cannot be decrypted with the providers of --encryption-provider-config")
	// ErrKMS: the configuration names a KMS provider, which Setpoint does
	// not run.
	ErrKMS = errors.New("encrypt: KMS providers are not supported; use aescbc, aesgcm, secretbox or identity")
)
