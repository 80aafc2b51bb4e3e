package gc

import (
	"context"
	"errors"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// walkPage is how many stored objects one page of a walk reads.
const walkPage = 1000

// walk lists every stored object of each served resource, page by page, and
// calls page with each page of r's objects, in key order. With oneRevision
// every resource is read at the revision of the first page, which it
// returns (the relist, which watches from there); without, each resource
// at its current one (the sweep, which a compaction during a long walk
// must not cut short).
//
// One resource the store cannot read (a value encrypted with a key the
// server lacks) must not stop collection of the others: walk logs it, names
// it in skipped and goes on. Its objects are missing from what page saw, so
// a caller must not take an object whose owner is among them for an orphan
// (the relist checks owners with live reads, which fail the same way), nor a
// namespace that may hold them for empty (the sweep). pass names the walk in
// the log.
func (c *Collector) walk(ctx context.Context, pass string, oneRevision bool, page func(r kinds.Resource, items []store.KeyValue)) (rev int64, skipped []kinds.Resource, _ error) {
	for _, r := range c.svc.GroupResources() {
		opts := store.ListOptions{Limit: walkPage}
		if oneRevision {
			opts.Revision = rev
		}
		for {
			res, err := c.st.List(ctx, store.ResourcePrefix(r.GVR.Group, r.GVR.Resource, ""), opts)
			if err != nil && unreadable(ctx, err) {
				c.log.Warn("garbage collector skips a resource it cannot read", "pass", pass, "resource", r.GVR.GroupResource().String(), "err", err)
				skipped = append(skipped, r)
				break
			}
			if err != nil {
				return 0, nil, err
			}
			if rev == 0 {
				rev = res.Revision
			}
			page(r, res.Items)
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
	}
	return rev, skipped, nil
}

// unreadable tells whether a list failed for what its values hold rather
// than for the store or the caller: the store answers and others list.
func unreadable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, transient := range []error{store.ErrUnavailable, store.ErrClosed, store.ErrCompacted,
		store.ErrFutureRevision, store.ErrInvalidContinue, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, transient) {
			return false
		}
	}
	return true
}
