package badger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

// hub holds the ring of recent events and the live watchers. The notifier
// goroutine is its only writer of events.
type hub struct {
	mu sync.Mutex
	// ring holds the events of revisions (notified-len(ring)+1 .. notified]
	// that happened since open, at index rev % cap.
	ring     []store.Event
	low      int64 // lowest revision in ring; low > notified when empty
	notified int64 // revision of the last event fanned out
	// bytes is what the documents of the ring's events hold; past maxBytes
	// the oldest events leave the ring early (watchers that need them
	// replay them from the history on disk), so a run of large documents
	// (modules, objects near the request limit) cannot pin gigabytes.
	bytes, maxBytes int
	live            map[*watcher]struct{}
	closed          error // set once the store closes
}

func newHub(size, maxBytes int, rev int64) *hub {
	return &hub{ring: make([]store.Event, size), maxBytes: maxBytes, low: rev + 1, notified: rev, live: make(map[*watcher]struct{})}
}

// eventBytes is what an event in the ring keeps alive.
func eventBytes(ev store.Event) int {
	n := len(ev.Object.Key) + len(ev.Object.Value)
	if ev.Prev != nil {
		n += len(ev.Prev.Value)
	}
	return n
}

// watchChan is the capacity of a watcher's channel. It is small, so that an
// idle watcher costs little: a live watcher that falls further behind keeps
// the rest of its WatchBuffer events in pending, grown on demand, and a
// drain goroutine of its own moves them into the channel until it has
// caught up.
const watchChan = 16

// watcher is one running watch. ch is closed exactly once, under hub.mu: by
// end, or by the drain goroutine when one is running.
type watcher struct {
	db     *DB
	prefix string
	ch     chan store.Event
	// spare is how many events pending may hold: WatchBuffer beyond the
	// channel's capacity.
	spare int
	// pending holds the events that did not fit in ch, in order, while
	// draining; guarded by hub.mu.
	pending  []store.Event
	draining bool          // a drain goroutine owns sends on ch and its close; guarded by hub.mu
	cut      chan struct{} // closed by end while draining, to wake the drain goroutine
	// start: events at or below it are not sent. Set before the watcher
	// goes live; read by the notifier under hub.mu.
	start    int64
	stopOnce sync.Once
	stop     chan struct{} // closed by Stop
	stopCtx  func() bool   // releases the context.AfterFunc; guarded by hub.mu
	ended    bool          // guarded by hub.mu
	err      error         // guarded by hub.mu; valid once ch is closed
}

func (w *watcher) Events() <-chan store.Event { return w.ch }

func (w *watcher) Err() error {
	w.db.hub.mu.Lock()
	defer w.db.hub.mu.Unlock()
	return w.err
}

// Progress is the revision of the last event fanned out when w is live and
// nothing waits in pending: publish puts each event in ch, or in pending,
// under hub.mu before it moves notified, and a watcher goes live only once it
// has been sent everything up to notified.
func (w *watcher) Progress() (int64, bool) {
	h := w.db.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, live := h.live[w]; !live || w.draining {
		return 0, false
	}
	return h.notified, true
}

func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		h := w.db.hub
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.live[w]; ok {
			h.endLocked(w, nil)
		}
		// A watcher still catching up is ended by its own goroutine.
	})
}

// endLocked ends w with err. The caller holds h.mu.
func (h *hub) endLocked(w *watcher, err error) {
	if w.ended {
		return
	}
	w.ended = true
	w.err = err
	delete(h.live, w)
	if w.draining {
		w.pending = nil // dropped: the consumer resumes from what it got
		close(w.cut)    // the drain goroutine closes ch
	} else {
		close(w.ch)
	}
	if w.stopCtx != nil {
		w.stopCtx() // the context no longer needs to stop this watcher
	}
}

// closeAll ends every live watcher with err and refuses new ones.
func (h *hub) closeAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = err
	for w := range h.live {
		h.endLocked(w, err)
	}
}

// publish appends a group's events to the ring and fans them out to the live
// watchers without ever blocking.
func (h *hub) publish(events []store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := int64(len(h.ring))
	for _, ev := range events {
		slot := ev.Revision() % n
		if old := h.ring[slot]; old.Revision() >= h.low {
			h.bytes -= eventBytes(old)
		}
		h.ring[slot] = ev
		h.bytes += eventBytes(ev)
	}
	h.notified = events[len(events)-1].Revision()
	h.low = max(h.low, h.notified-n+1)
	// The newest event always stays, whatever its size.
	for h.bytes > h.maxBytes && h.low < h.notified {
		slot := h.low % n
		h.bytes -= eventBytes(h.ring[slot])
		h.ring[slot] = store.Event{}
		h.low++
	}
	for w := range h.live {
		for _, ev := range events {
			if ev.Revision() <= w.start || !strings.HasPrefix(ev.Object.Key, w.prefix) {
				continue
			}
			if !w.draining {
				select {
				case w.ch <- ev:
					continue
				default:
				}
			}
			if len(w.pending) >= w.spare {
				h.endLocked(w, store.ErrWatcherTooSlow)
				break
			}
			w.pending = append(w.pending, ev)
			if !w.draining {
				w.draining = true
				w.cut = make(chan struct{})
				w.db.watchers.Add(1)
				go w.db.drain(w)
			}
		}
	}
}

// drain is a live watcher's drain goroutine: it moves the pending events
// into the channel, in order, and exits once none is left, or closes the
// channel and exits once the watcher has ended.
func (db *DB) drain(w *watcher) {
	defer db.watchers.Done()
	h := db.hub
	for {
		h.mu.Lock()
		if w.ended {
			w.draining = false
			close(w.ch)
			h.mu.Unlock()
			return
		}
		if len(w.pending) == 0 {
			w.draining = false
			w.pending = nil // an idle watcher keeps no buffer
			h.mu.Unlock()
			return
		}
		ev := w.pending[0]
		w.pending[0] = store.Event{}
		w.pending = w.pending[1:]
		cut := w.cut
		h.mu.Unlock()
		select {
		case w.ch <- ev:
		case <-cut:
		}
	}
}

// notifyLoop is the notifier goroutine; see the package comment. It ends when
// Close closes notifyCh, after the last write.
func (db *DB) notifyLoop() {
	defer db.loops.Done()
	for events := range db.notifyCh {
		db.hub.publish(events)
	}
}

// Watch starts a watch of the keys under prefix after fromRevision. Events
// share their documents with the store and other watchers: read them, do not
// modify them.
func (db *DB) Watch(ctx context.Context, prefix string, fromRevision int64) (store.Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fromRevision < 0 {
		return nil, fmt.Errorf("store/badger: negative revision %d", fromRevision)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.closeMu.RUnlock()
	if err := db.sound(); err != nil {
		return nil, err
	}
	if fromRevision == 0 {
		fromRevision = db.committed.Load()
	}
	if err := db.pins.pin(fromRevision); err != nil {
		return nil, fmt.Errorf("store/badger: watch from %d: %w", fromRevision, err)
	}
	w := &watcher{
		db:     db,
		prefix: prefix,
		ch:     make(chan store.Event, min(db.opts.WatchBuffer, watchChan)),
		spare:  max(db.opts.WatchBuffer-watchChan, 0),
		start:  fromRevision,
		stop:   make(chan struct{}),
	}
	// Under hub.mu, because a done context runs Stop at once, on another
	// goroutine, and the watcher's end reads stopCtx.
	db.hub.mu.Lock()
	w.stopCtx = context.AfterFunc(ctx, w.Stop)
	db.hub.mu.Unlock()
	db.watchers.Add(1)
	go db.catchUp(w)
	return w, nil
}

// catchUp is a watcher's catch-up goroutine: it sends the events after
// w.start from the ring or from history until the watcher has seen every
// notified event, then makes it live and exits. It holds a pin on its cursor.
func (db *DB) catchUp(w *watcher) {
	defer db.watchers.Done()
	cursor := w.start
	defer func() { db.pins.unpin(cursor) }()
	h := db.hub
	var buf []store.Event
	for {
		h.mu.Lock()
		switch {
		case h.closed != nil:
			h.endLocked(w, h.closed)
			h.mu.Unlock()
			return
		case isClosed(w.stop):
			h.endLocked(w, nil)
			h.mu.Unlock()
			return
		case cursor >= h.notified:
			w.start = cursor
			h.live[w] = struct{}{}
			h.mu.Unlock()
			return
		}
		var upto int64
		buf = buf[:0]
		if cursor+1 >= h.low {
			// From the ring, in chunks so the lock is short.
			n := int64(len(h.ring))
			upto = min(h.notified, cursor+256)
			for r := cursor + 1; r <= upto; r++ {
				if ev := h.ring[r%n]; strings.HasPrefix(ev.Object.Key, w.prefix) {
					buf = append(buf, ev)
				}
			}
			h.mu.Unlock()
		} else {
			upto = h.low - 1
			h.mu.Unlock()
			var err error
			buf, upto, err = db.replay(buf, w.prefix, cursor, upto)
			if err != nil {
				if !errors.Is(err, store.ErrClosed) {
					db.log.Error("watch replay failed", "prefix", w.prefix, "rev", cursor, "err", err)
				}
				h.mu.Lock()
				h.endLocked(w, err)
				h.mu.Unlock()
				return
			}
		}
		sent := true
		for _, ev := range buf {
			select {
			case w.ch <- ev:
				continue
			case <-w.stop:
			case <-db.closing:
			}
			// Stopped or closing: send nothing after an event not sent,
			// so what the consumer got has no gap; the checks above end
			// the watcher.
			sent = false
			break
		}
		if !sent {
			continue
		}
		if upto > cursor {
			db.pins.move(cursor, upto)
			cursor = upto
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// replay reads the events after cursor, up to upto, from the history on disk,
// stopping after about 256 events; it returns the events under prefix and the
// revision it reached.
func (db *DB) replay(buf []store.Event, prefix string, cursor, upto int64) ([]store.Event, int64, error) {
	if err := db.enter(); err != nil {
		return nil, 0, err
	}
	defer db.closeMu.RUnlock()
	txn := db.bdb.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(bdg.IteratorOptions{Prefix: historyPrefix})
	defer it.Close()
	reached := cursor
	for it.Seek(historyKey(cursor + 1)); it.Valid() && reached < upto && reached-cursor < 256; it.Next() {
		last, ok := historyKeyRev(it.Item().Key())
		if !ok {
			return nil, 0, fmt.Errorf("store/badger: bad history key %x", it.Item().Key())
		}
		raw, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, 0, db.readFailed(fmt.Errorf("history %d: %w", last, err))
		}
		evs, err := decodeRecord(raw, last)
		if err != nil {
			return nil, 0, db.readFailed(fmt.Errorf("history %d: %w", last, err))
		}
		if first := evs[0].rev; first > reached+1 {
			return nil, 0, fmt.Errorf("store/badger: history gap before %d: %w", first, store.ErrCompacted)
		}
		for _, re := range evs {
			if re.rev <= reached || re.rev > upto {
				continue
			}
			reached = re.rev
			if !strings.HasPrefix(re.key, prefix) {
				continue
			}
			ev, err := db.historyEvent(re)
			if err != nil {
				return nil, 0, err
			}
			buf = append(buf, ev)
		}
	}
	if reached < upto && reached-cursor < 256 {
		return nil, 0, fmt.Errorf("store/badger: history ends at %d before %d: %w", reached, upto, store.ErrCompacted)
	}
	return buf, reached, nil
}

// historyEvent builds a full event from a record event, reading the previous
// document from the index at the revision before it.
func (db *DB) historyEvent(re recordEvent) (store.Event, error) {
	obj := store.KeyValue{Key: re.key, Value: re.value, CreateRevision: re.createRev, ModRevision: re.rev}
	if re.typ == store.Added {
		return store.Event{Type: store.Added, Object: obj}, nil
	}
	prev, err := db.getAt(re.key, re.rev-1)
	if err != nil {
		return store.Event{}, fmt.Errorf("store/badger: previous of %q at %d: %w", re.key, re.rev, err)
	}
	if re.typ == store.Deleted {
		obj = *prev
		obj.ModRevision = re.rev
	}
	return store.Event{Type: re.typ, Object: obj, Prev: prev}, nil
}
