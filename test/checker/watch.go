package checker

import (
	"errors"
	"fmt"
)

// Event types as the watch API sends them.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
)

// WatchEvent is one event a watch delivered.
type WatchEvent struct {
	Type  string
	Name  string
	RV    int64
	Value string
}

// Segment is what one watch connection delivered: it asked for events
// after StartRV and either ended (a timeout, a broken connection, a server
// restart) or answered 410 Gone, after which the client relisted and the
// next segment starts at the list's resourceVersion. Relist marks a
// segment after which the client relisted by choice, as an informer may.
type Segment struct {
	StartRV int64
	Events  []WatchEvent
	Gone    bool
	Relist  bool
}

// Write is a write the history knows the outcome of: an object created or
// updated at RV with Value.
type Write struct {
	Name  string
	Value string
	RV    int64
}

// CheckWatch checks one watcher's segments against the writes that the
// recorded history knows succeeded, and the values of every write that
// was attempted (Ambiguous ones included). It returns every violation:
//
//   - a segment resumed anywhere but right after the last revision the
//     watcher saw (event or bookmark), unless the previous one got 410 or
//     relisted;
//   - an event at or before the revision before it (a reorder or a
//     duplicate), or at or before the segment's start;
//   - a bookmark behind the last revision seen, or one that passed an
//     event the watch had not yet delivered (the event comes after it);
//   - a known write inside the window a segment covered that it did not
//     deliver (a gap);
//   - an event whose content is no write's (a stale or invented object).
func CheckWatch(segs []Segment, known []Write, attempted map[string]bool) error {
	byRV := make(map[int64]Write, len(known))
	for _, w := range known {
		byRV[w.RV] = w
	}
	var errs []error
	var last int64 = -1 // last revision seen across segments
	prevGone := true
	for i, seg := range segs {
		if !prevGone && seg.StartRV != last {
			errs = append(errs, fmt.Errorf("segment %d resumed at %d, not after the last revision seen %d", i, seg.StartRV, last))
		}
		prevGone = seg.Gone || seg.Relist
		last = seg.StartRV
		lastEvent := last // the last revision an event (not a bookmark) or the start gave
		delivered := map[int64]bool{}
		for _, ev := range seg.Events {
			if ev.Type == Bookmark {
				if ev.RV < last {
					errs = append(errs, fmt.Errorf("segment %d: bookmark %d behind revision %d", i, ev.RV, last))
				} else {
					last = ev.RV
				}
				continue
			}
			if ev.RV <= lastEvent {
				errs = append(errs, fmt.Errorf("segment %d: %s %s at %d after revision %d (reordered or duplicate)", i, ev.Type, ev.Name, ev.RV, lastEvent))
				continue
			}
			if ev.RV <= last {
				errs = append(errs, fmt.Errorf("segment %d: %s %s at %d after bookmark %d: the bookmark passed an event not yet delivered", i, ev.Type, ev.Name, ev.RV, last))
				continue
			}
			last, lastEvent = ev.RV, ev.RV
			delivered[ev.RV] = true
			if ev.Type == Deleted {
				continue
			}
			if w, ok := byRV[ev.RV]; ok {
				if w.Name != ev.Name || w.Value != ev.Value {
					errs = append(errs, fmt.Errorf("segment %d: %s at %d is %s=%q, the write there was %s=%q", i, ev.Type, ev.RV, ev.Name, ev.Value, w.Name, w.Value))
				}
			} else if !attempted[ev.Value] {
				errs = append(errs, fmt.Errorf("segment %d: %s %s at %d carries %q, which no client wrote", i, ev.Type, ev.Name, ev.RV, ev.Value))
			}
		}
		for _, w := range known {
			if w.RV > seg.StartRV && w.RV <= last && !delivered[w.RV] {
				errs = append(errs, fmt.Errorf("segment %d: write %s=%q at %d inside (%d, %d] never delivered (gap)", i, w.Name, w.Value, w.RV, seg.StartRV, last))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckPerObjectOrder checks what an informer's handlers saw: for each
// object, the resourceVersions of its adds and updates never go back (a
// relist may repeat one), and nothing follows a delete but a new add.
func CheckPerObjectOrder(events []WatchEvent) error {
	var errs []error
	last := map[string]int64{}
	for _, ev := range events {
		if ev.Type == Deleted {
			delete(last, ev.Name)
			continue
		}
		if prev, ok := last[ev.Name]; ok && ev.RV < prev {
			errs = append(errs, fmt.Errorf("%s %s at %d after %d", ev.Type, ev.Name, ev.RV, prev))
		}
		last[ev.Name] = ev.RV
	}
	return errors.Join(errs...)
}
