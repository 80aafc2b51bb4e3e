package etcd

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store"
)

// feedRing is how many of its newest events a feed keeps at least (at most
// twice as many), so that a watch
// starting a little behind the feed (an informer resuming from its last
// resourceVersion) still shares it.
const feedRing = 4096

// feed is one etcd watch over every key of the store, shared by the watches
// that start at or after the oldest revision it can replay: etcd sends each
// event to a server once, and the client decodes it once, whatever the
// number of watches. A watch further behind gets its own etcd watch
// (watcher), which replays history with back-pressure.
//
// Lock order: DB.feedMu, then feed.mu, then sub.mu.
type feed struct {
	db     *DB
	cancel context.CancelFunc
	stop   chan struct{} // closed when the last watch leaves
	done   chan struct{} // closed when run ends
	asked  atomic.Bool   // a watch asked for progress since the last request
	keep   int           // how many events ring keeps at least (feedRing)

	mu sync.Mutex
	// floor: every event after it is in ring or still to come; guarded by mu.
	floor int64
	// ring holds the newest events, oldest first; guarded by mu.
	ring []store.Event
	// known: every event up to it has been received; guarded by mu.
	known int64
	subs  map[*sub]struct{} // guarded by mu
	err   error             // why run ended; guarded by mu
}

// sub is a watch served by a feed. The feed sends on ch while nothing is
// pending, the watch's goroutine (run) sends the pending events and closes
// ch once the watch has left the feed.
type sub struct {
	f      *feed
	prefix string
	from   int64
	ch     chan store.Event
	spare  int
	// catchUpTo is the revision when the watch started: events up to it,
	// replayed from the ring, do not count toward spare.
	catchUpTo int64
	notify    chan struct{} // a token when pending grew

	stopOnce sync.Once
	stop     chan struct{}
	stopCtx  func() bool

	mu      sync.Mutex
	pending []store.Event // guarded by mu
	live    int           // events in pending after catchUpTo; guarded by mu
	tooSlow bool          // guarded by mu
	ended   bool          // guarded by mu
	err     error         // guarded by mu; valid once ch is closed
}

func (s *sub) Events() <-chan store.Event { return s.ch }

func (s *sub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Progress is the highest revision up to which the feed has received every
// event, while none of the watch's waits outside its channel.
func (s *sub) Progress() (int64, bool) {
	s.f.asked.Store(true)
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || len(s.pending) > 0 {
		return 0, false
	}
	// Every event up to the feed's known has been handed to every watch
	// (publish holds f.mu while it does).
	return max(s.from, s.f.known), true
}

func (s *sub) Stop() { s.stopOnce.Do(func() { close(s.stop) }) }

// join serves a watch of prefix after from through the store's feed,
// starting the feed at cur when there is none. It returns nil when the
// feed cannot replay from (the watch is too far behind).
func (db *DB) join(ctx context.Context, prefix string, from, cur int64) *sub {
	db.feedMu.Lock()
	defer db.feedMu.Unlock()
	f := db.feed
	if f == nil {
		if from < cur {
			return nil
		}
		f = db.startFeed(cur)
		db.feed = f
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if from < f.floor {
		return nil
	}
	s := &sub{
		f:         f,
		prefix:    prefix,
		from:      from,
		ch:        make(chan store.Event, min(db.opts.WatchBuffer, watchChan)),
		spare:     max(db.opts.WatchBuffer-watchChan, 0),
		catchUpTo: cur,
		notify:    make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	s.add(f.ring)
	f.subs[s] = struct{}{}
	s.stopCtx = context.AfterFunc(ctx, s.Stop)
	db.watchers.Add(1)
	go s.run()
	return s
}

// startFeed starts the etcd watch of every key after rev. The caller holds
// feedMu.
func (db *DB) startFeed(rev int64) *feed {
	start, end, _ := db.span("")
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	f := &feed{
		db:     db,
		cancel: cancel,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		keep:   cmp.Or(db.feedRing, feedRing),
		floor:  rev,
		known:  rev,
		subs:   map[*sub]struct{}{},
	}
	wch := db.cli.Watch(ctx, start, clientv3.WithRange(end), clientv3.WithRev(rev+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	db.etcdWatches.Add(1)
	db.watchers.Add(1)
	go f.run(ctx, wch)
	return f
}

// run receives the feed's events from etcd and hands each watch those
// under its prefix.
func (f *feed) run(ctx context.Context, wch clientv3.WatchChan) {
	db := f.db
	defer db.watchers.Done()
	ask, stopAsking := db.progressTicks()
	defer stopAsking()
	var err error
loop:
	for {
		select {
		case resp, ok := <-wch:
			if !ok {
				err = fmt.Errorf("store/etcd: watch ended: %w", ErrUnavailable)
				break loop
			}
			if e := resp.Err(); e != nil {
				err = db.mapErr("watch", e)
				if resp.CompactRevision != 0 {
					err = fmt.Errorf("store/etcd: watch compacted at %d: %w", resp.CompactRevision, store.ErrCompacted)
				}
				break loop
			}
			evs := make([]store.Event, len(resp.Events))
			for i, ev := range resp.Events {
				evs[i] = db.event(ev)
			}
			f.publish(evs, resp.IsProgressNotify(), resp.Header.Revision)
		case <-ask:
			if f.asked.Swap(false) {
				db.askProgress(ctx)
			}
		case <-f.stop:
			break loop
		case <-db.closing:
			err = store.ErrClosed
			break loop
		}
	}
	f.cancel()
	db.feedMu.Lock()
	if db.feed == f {
		db.feed = nil
	}
	f.mu.Lock()
	f.err = err
	if err == nil {
		f.err = store.ErrClosed
	}
	n := len(f.subs)
	f.mu.Unlock()
	db.feedMu.Unlock()
	close(f.done)
	if err != nil && err != store.ErrClosed && n > 0 {
		db.log.Warn("watch ended", "watches", n, "err", err)
	}
}

// publish keeps evs in the ring and hands them to every watch.
func (f *feed) publish(evs []store.Event, progress bool, rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range evs {
		f.known = evs[i].Revision()
	}
	if progress && len(evs) == 0 {
		f.known = max(f.known, rev)
	}
	f.ring = append(f.ring, evs...)
	if len(f.ring) >= 2*f.keep {
		// Trimmed by halves, so that a copy is paid once per keep events.
		drop := len(f.ring) - f.keep
		f.floor = f.ring[drop-1].Revision()
		f.ring = append(make([]store.Event, 0, 2*f.keep), f.ring[drop:]...)
	}
	for s := range f.subs {
		s.add(evs)
	}
}

// leave removes s from the feed, and stops the feed when s was its last
// watch.
func (f *feed) leave(s *sub) {
	db := f.db
	db.feedMu.Lock()
	defer db.feedMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
	if len(f.subs) == 0 && db.feed == f {
		db.feed = nil
		close(f.stop)
	}
}

// add queues the events of evs that the watch selects. The caller holds
// the feed's mu.
func (s *sub) add(evs []store.Event) {
	s.mu.Lock()
	grew := false
	for i := range evs {
		if s.tooSlow {
			break
		}
		ev := &evs[i]
		rev := ev.Revision()
		if rev <= s.from || !strings.HasPrefix(ev.Object.Key, s.prefix) {
			continue
		}
		if len(s.pending) == 0 {
			// The feed may send too: ch is closed only after the watch
			// has left the feed, under the feed's mu that the caller holds.
			select {
			case s.ch <- *ev:
				continue
			default:
			}
		}
		s.pending = append(s.pending, *ev)
		grew = true
		if rev > s.catchUpTo {
			if s.live++; s.live > s.spare {
				s.tooSlow = true
			}
		}
	}
	s.mu.Unlock()
	if grew || s.tooSlow {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// run moves the watch's pending events into ch, and ends the watch.
func (s *sub) run() {
	db := s.f.db
	defer db.watchers.Done()
	var err error
loop:
	for {
		s.mu.Lock()
		if s.tooSlow {
			s.mu.Unlock()
			err = store.ErrWatcherTooSlow
			break
		}
		var out chan store.Event
		var next store.Event
		if len(s.pending) > 0 {
			out, next = s.ch, s.pending[0]
		}
		s.mu.Unlock()
		select {
		case out <- next:
			s.mu.Lock()
			if next.Revision() > s.catchUpTo {
				s.live--
			}
			s.pending[0] = store.Event{}
			if s.pending = s.pending[1:]; len(s.pending) == 0 {
				s.pending = nil
			}
			s.mu.Unlock()
		case <-s.notify:
		case <-s.stop:
			break loop
		case <-s.f.done:
			s.f.mu.Lock()
			err = s.f.err
			s.f.mu.Unlock()
			break loop
		case <-db.closing:
			err = store.ErrClosed
			break loop
		}
	}
	s.f.leave(s)
	s.stopCtx()
	s.mu.Lock()
	s.err = err
	s.ended = true
	s.pending = nil
	s.mu.Unlock()
	close(s.ch)
}
