package store

import (
	"context"
	"errors"
	"fmt"
)

// ListPages lists the documents under prefix as List with opts does, page
// by page from the page opts names to the last, and calls page with the
// items of each, in key order; the items are page's to keep. Every page is
// read at one revision, the first page's (opts.Revision, or the current
// revision when it is 0): each next page is read through the token of the
// one before, which carries it. ListPages returns that revision, with an
// error too once the first page was read (0 before).
//
// It stops at the first error of List, which it returns as List gave it,
// or of page, which it returns too unless it is StopPages: then it ends
// the list early with a nil error. page may be nil when opts.Filter does
// the work.
func ListPages(ctx context.Context, st Store, prefix string, opts ListOptions, page func(items []KeyValue) error) (int64, error) {
	var rev int64
	for n := 0; ; n++ {
		res, err := st.List(ctx, prefix, opts)
		if err != nil {
			return rev, err
		}
		switch {
		case n == 0 && opts.Revision != 0 && res.Revision != opts.Revision:
			return 0, fmt.Errorf("store: list of %q at revision %d read at %d", prefix, opts.Revision, res.Revision)
		case n == 0:
			rev = res.Revision
		case res.Revision != rev:
			return rev, fmt.Errorf("store: page %d of the list of %q read at revision %d, the first at %d", n+1, prefix, res.Revision, rev)
		}
		if page != nil {
			if err := page(res.Items); errors.Is(err, StopPages) {
				return rev, nil
			} else if err != nil {
				return rev, err
			}
		}
		if res.Continue == "" {
			return rev, nil
		}
		opts.Continue = res.Continue
	}
}
