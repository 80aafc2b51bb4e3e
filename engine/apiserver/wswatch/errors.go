package wswatch

import "errors"

var (
	// ErrOrigin is returned by Serve when the request's Origin is not allowed.
	ErrOrigin = errors.New("wswatch: origin not allowed")
	// ErrTooSlow is returned by Serve when the client was closed with
	// CloseTooSlow.
	ErrTooSlow = errors.New("wswatch: client too slow")
	// ErrBadOrigin is returned by New for an AllowedOrigins entry that is not
	// a plain scheme://host[:port].
	ErrBadOrigin = errors.New("wswatch: bad allowed origin")

	// errCloseSent is a write of events after the close frame.
	errCloseSent = errors.New("wswatch: write after the close frame")
)
