package controller

import "errors"

// Suspended is implemented by the error of a call that was not made
// because the plugin's calls are suspended after repeated failures (a
// circuit breaker). The object's Ready condition then says so without an
// attempt count, so that an object updated without pause is not rewritten
// on every refused call, and the refusal is logged at debug level.
type Suspended interface {
	error
	CallsSuspended()
}

func suspended(err error) bool {
	var s Suspended
	return errors.As(err, &s)
}

// saysSuspended reports whether the observed status's Ready condition
// already says what ready says of a refused call. The controller then
// writes nothing: the object's status keeps the generation last
// reconciled, which is true, and a suspended plugin's objects updated
// without pause cost no writes.
func saysSuspended(observed map[string]any, ready readyCondition) bool {
	prev, ok := readyOf(observed)
	return ok && prev["status"] == string(ready.status) && prev["reason"] == ready.reason && prev["message"] == ready.text()
}
