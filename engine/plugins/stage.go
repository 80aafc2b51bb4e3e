package plugins

// Candidate is a version of a plugin that Host.Stage loaded and verified
// but that serves nothing yet. The Manager commits it only once its exports
// cover every binding of the Plugin's spec; until then, and when it is
// discarded, the version that served before keeps serving reconcile and
// admission.
type Candidate interface {
	// Exports are the handlers the candidate provides.
	Exports() Exports
	// Commit swaps the candidate in atomically: calls in flight finish on
	// the previous version, new calls reach the candidate, and the previous
	// version closes once its calls are over. A candidate whose Commit
	// failed is discarded.
	Commit() error
	// Discard releases a candidate that will not serve. It does nothing
	// after Commit and is idempotent.
	Discard()
}
