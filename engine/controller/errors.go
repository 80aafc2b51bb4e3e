package controller

import "errors"

var (
	// ErrInvalidOptions is returned by New for options it cannot run with.
	ErrInvalidOptions = errors.New("controller: invalid options")
	// ErrInvalidChild means a plugin returned a child the engine cannot apply:
	// malformed, of a kind the controller does not own, in another
	// namespace, or named twice. It is terminal: retrying gives the same
	// answer until the object changes.
	ErrInvalidChild = errors.New("controller: invalid child")
	// ErrNotControlled means a desired child's name is taken by an object
	// this object does not control.
	ErrNotControlled = errors.New("controller: child exists and is not controlled by this object")
	// ErrPanic wraps a panic recovered from a reconciler, a finalizer or
	// the reconcile itself.
	ErrPanic = errors.New("controller: panic during reconcile")
	// ErrNotDone means a finalizer asked to be called again.
	ErrNotDone = errors.New("controller: finalize not done")
)

// ErrStatusRefused wraps the server's answer to a status the plugin
// returned and the server refused (invalid, forbidden, too large).
var ErrStatusRefused = errors.New("controller: status refused")
