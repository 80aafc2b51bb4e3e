package plugins

import "errors"

// Sentinel errors.
var (
	// ErrModuleNotFound: no module with that digest was uploaded.
	ErrModuleNotFound = errors.New("plugins: module not found")
	// ErrInvalidSpec: a Plugin's spec cannot be used as is.
	ErrInvalidSpec = errors.New("plugins: invalid spec")
	// ErrNotServed: a binding names a resource the server does not serve.
	ErrNotServed = errors.New("plugins: resource not served")
)
