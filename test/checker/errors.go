package checker

import "errors"

var (
	// ErrNotLinearizable: the history has no linearization; the server
	// broke its promise.
	ErrNotLinearizable = errors.New("checker: not linearizable")
	// ErrUnknown: the search for a linearization ran out of time. It proves
	// nothing either way: a caller counts the history neither as passed
	// nor as failed.
	ErrUnknown = errors.New("checker: linearizability unknown (the check timed out)")
)
