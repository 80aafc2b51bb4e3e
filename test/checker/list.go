package checker

import (
	"errors"
	"fmt"
	"sort"
)

// Listed is one object of a list: the resourceVersion it was last written
// at and its value.
type Listed struct {
	RV    int64
	Value string
}

// List is what a list returned: the list's resourceVersion and its objects
// by name.
type List struct {
	RV    int64
	Items map[string]Listed
}

// change is one revision of one object that the history shows: a write
// (a known one, or one a watch delivered) or a delete a watch delivered.
type change struct {
	rv      int64
	deleted bool
	value   string
}

// CheckList checks a list (a watcher's relist after 410, or any list that
// reports its resourceVersion) against the history at the list's
// resourceVersion: the writes the clients know succeeded and what the
// watches delivered, segs, which CheckWatch must have passed. It returns
// every violation:
//
//   - an object whose resourceVersion is newer than the list's (a write
//     after the list's revision, or an object invented);
//   - an object whose content is not what was written at its
//     resourceVersion, or that a delete ended at that revision;
//   - an object older than the last change the history shows for it at or
//     before the list's revision (a stale value), or shown after the
//     delete that ended it;
//   - an object missing although the history shows a write of it at or
//     before the list's revision and no delete after it up to the list's
//     revision, where one watch segment covered that whole interval (so
//     that a delete would have been delivered).
func CheckList(l List, known []Write, segs []Segment, attempted map[string]bool) error {
	changes := map[string][]change{}
	atRV := map[int64]string{} // revision -> name, for every change known
	add := func(name string, c change) {
		if n, ok := atRV[c.rv]; ok && n == name {
			return // the same write, known twice
		}
		atRV[c.rv] = name
		changes[name] = append(changes[name], c)
	}
	for _, w := range known {
		add(w.Name, change{rv: w.RV, value: w.Value})
	}
	type window struct{ from, to int64 }
	var windows []window
	for _, seg := range segs {
		end := seg.StartRV
		for _, ev := range seg.Events {
			end = max(end, ev.RV)
			switch ev.Type {
			case Added, Modified:
				add(ev.Name, change{rv: ev.RV, value: ev.Value})
			case Deleted:
				add(ev.Name, change{rv: ev.RV, deleted: true})
			}
		}
		windows = append(windows, window{seg.StartRV, end})
	}
	covered := func(from, to int64) bool {
		for _, w := range windows {
			if w.from <= from && to <= w.to {
				return true
			}
		}
		return false
	}
	byRV := map[int64]change{}
	for name, cs := range changes {
		sort.Slice(cs, func(i, j int) bool { return cs[i].rv < cs[j].rv })
		changes[name] = cs
		for _, c := range cs {
			byRV[c.rv] = c
		}
	}

	var errs []error
	names := make([]string, 0, len(l.Items))
	for name := range l.Items {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		it := l.Items[name]
		if it.RV > l.RV {
			errs = append(errs, fmt.Errorf("list at %d holds %s at %d, after the list's revision", l.RV, name, it.RV))
			continue
		}
		if c, ok := byRV[it.RV]; ok {
			switch {
			case atRV[it.RV] != name:
				errs = append(errs, fmt.Errorf("list at %d holds %s at %d, where the history shows a change of %s", l.RV, name, it.RV, atRV[it.RV]))
			case c.deleted:
				errs = append(errs, fmt.Errorf("list at %d holds %s at %d, the revision of its delete", l.RV, name, it.RV))
			case c.value != it.Value:
				errs = append(errs, fmt.Errorf("list at %d holds %s=%q at %d, the write there was %q", l.RV, name, it.Value, it.RV, c.value))
			}
		} else if !attempted[it.Value] {
			errs = append(errs, fmt.Errorf("list at %d holds %s=%q at %d, which no client wrote", l.RV, name, it.Value, it.RV))
		}
	}
	all := make([]string, 0, len(changes))
	for name := range changes {
		all = append(all, name)
	}
	sort.Strings(all)
	for _, name := range all {
		var last *change
		for i, c := range changes[name] {
			if c.rv <= l.RV {
				last = &changes[name][i]
			}
		}
		if last == nil {
			continue
		}
		it, listed := l.Items[name]
		switch {
		case listed && it.RV < last.rv && last.deleted:
			errs = append(errs, fmt.Errorf("list at %d holds %s at %d, deleted at %d", l.RV, name, it.RV, last.rv))
		case listed && it.RV < last.rv:
			errs = append(errs, fmt.Errorf("list at %d holds %s at %d, older than its write at %d (stale)", l.RV, name, it.RV, last.rv))
		case !listed && !last.deleted && covered(last.rv, l.RV):
			errs = append(errs, fmt.Errorf("list at %d misses %s, written at %d and not deleted after", l.RV, name, last.rv))
		}
	}
	return errors.Join(errs...)
}
