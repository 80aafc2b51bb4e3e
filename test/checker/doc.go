// Package checker holds the checkers that test Setpoint's promises against
// recorded client histories: a porcupine model of a key-value map with
// resourceVersions (linearizability of create, get, update with a
// resourceVersion precondition, delete and list), and a watch checker
// (revision order, no duplicates, no gaps, bookmarks never behind, resumed
// watches start after the last event seen, bookmarks never pass an event
// not yet delivered), and a list checker (a relist holds exactly the
// objects the history shows at the list's resourceVersion). A
// linearizability check that runs out of time is unknown (ErrUnknown),
// never passed. The functions take plain
// histories so that unit tests can feed them deliberately broken ones and
// prove that each checker fails when it should.
//
// It imports porcupine and the standard library only; it knows nothing of
// the server or of HTTP.
package checker
