package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store"
)

// watchChan is the capacity of a watcher's channel; the rest of its
// WatchBuffer waits in pending, grown on demand.
const watchChan = 16

// watcher is one running watch. Its goroutine (run) is the only sender on
// ch and closes it.
type watcher struct {
	db     *DB
	prefix string
	ch     chan store.Event
	spare  int // how many events pending may hold
	// catchUpTo is the revision when the watch started: events up to it
	// are history, which etcd sends in large batches; they wait for the
	// consumer rather than count toward spare.
	catchUpTo int64
	// wch is etcd's watch channel; cancel ends the etcd watch.
	wch    clientv3.WatchChan
	wctx   context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	stop     chan struct{} // closed by Stop
	stopCtx  func() bool   // releases the context.AfterFunc

	mu sync.Mutex
	// known is a revision up to which every event of the watch has been
	// received from etcd; guarded by mu.
	known int64
	// waiting: events received wait in pending, not yet in ch; guarded by mu.
	waiting bool
	// asked: Progress was called since the last progress request; guarded
	// by mu.
	asked bool
	err   error // guarded by mu; valid once ch is closed
}

func (w *watcher) Events() <-chan store.Event { return w.ch }

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Progress is the highest revision etcd reported the watch complete up to
// (the last event received, or a progress notification), while no event
// waits outside the channel.
func (w *watcher) Progress() (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = true
	if w.waiting {
		return 0, false
	}
	return w.known, true
}

func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// Watch starts a watch of the keys under prefix after fromRevision: through
// the store's shared feed when it can replay from there, else on an etcd
// watch of its own.
func (db *DB) Watch(ctx context.Context, prefix string, fromRevision int64) (store.Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fromRevision < 0 {
		return nil, fmt.Errorf("store/etcd: negative revision %d", fromRevision)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	start, end, ok := db.span(prefix)
	if !ok {
		// Nothing can match: watch the one key the store never writes.
		start, end = db.prefix, ""
	}
	rctx, cancel := db.reqCtx(ctx)
	defer cancel()
	var cur int64
	if fromRevision == 0 {
		var err error
		if cur, err = db.currentRevision(rctx); err != nil {
			return nil, err
		}
		fromRevision = cur
	} else {
		// etcd reports a compacted start only once the watch runs; read at
		// fromRevision to fail here, as the contract asks.
		resp, err := db.cli.Get(rctx, start, clientv3.WithRev(fromRevision), clientv3.WithCountOnly())
		if err != nil {
			return nil, db.mapErr(fmt.Sprintf("watch %q from %d", prefix, fromRevision), err)
		}
		cur = resp.Header.Revision
	}
	if ok {
		if s := db.join(ctx, prefix, fromRevision, cur); s != nil {
			return s, nil
		}
	}
	w := &watcher{
		db:        db,
		prefix:    prefix,
		ch:        make(chan store.Event, min(db.opts.WatchBuffer, watchChan)),
		spare:     max(db.opts.WatchBuffer-watchChan, 0),
		stop:      make(chan struct{}),
		known:     fromRevision,
		catchUpTo: cur,
	}
	// RequireLeader: a member cut off from the cluster ends the watch
	// rather than keep it silent.
	w.wctx, w.cancel = context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	wopts := []clientv3.OpOption{
		clientv3.WithRev(fromRevision + 1), clientv3.WithPrevKV(), clientv3.WithProgressNotify(),
	}
	if end != "" {
		wopts = append(wopts, clientv3.WithRange(end))
	}
	w.wch = db.cli.Watch(w.wctx, start, wopts...)
	db.etcdWatches.Add(1)
	w.stopCtx = context.AfterFunc(ctx, w.Stop)
	db.watchers.Add(1)
	go w.run()
	return w, nil
}

// run is the watcher's goroutine: it moves etcd's responses into ch through
// pending, and ends the watcher.
func (w *watcher) run() {
	db := w.db
	defer db.watchers.Done()
	var pending []store.Event
	var err error
	ask, stopAsking := db.progressTicks()
	defer stopAsking()
loop:
	for {
		var out chan store.Event
		var next store.Event
		if len(pending) > 0 {
			out, next = w.ch, pending[0]
		}
		select {
		case out <- next:
			pending[0] = store.Event{}
			pending = pending[1:]
			if len(pending) == 0 {
				pending = nil
				w.mu.Lock()
				w.waiting = false
				w.mu.Unlock()
			}
		case resp, ok := <-w.wch:
			if !ok {
				err = fmt.Errorf("store/etcd: watch %q ended: %w", w.prefix, ErrUnavailable)
				break loop
			}
			if e := resp.Err(); e != nil {
				err = db.mapErr(fmt.Sprintf("watch %q", w.prefix), e)
				if resp.CompactRevision != 0 {
					err = fmt.Errorf("store/etcd: watch %q compacted at %d: %w", w.prefix, resp.CompactRevision, store.ErrCompacted)
				}
				break loop
			}
			w.mu.Lock()
			for _, ev := range resp.Events {
				pending = append(pending, db.event(ev))
				w.known = ev.Kv.ModRevision
			}
			if resp.IsProgressNotify() && len(resp.Events) == 0 {
				w.known = max(w.known, resp.Header.Revision)
			}
			w.waiting = len(pending) > 0
			w.mu.Unlock()
			// Move what fits into the channel now.
			for len(pending) > 0 {
				select {
				case w.ch <- pending[0]:
					pending[0] = store.Event{}
					pending = pending[1:]
					continue
				default:
				}
				break
			}
			if len(pending) == 0 {
				pending = nil
				w.mu.Lock()
				w.waiting = false
				w.mu.Unlock()
			}
			for len(pending) > w.spare && pending[0].Revision() <= w.catchUpTo {
				select {
				case w.ch <- pending[0]:
					pending[0] = store.Event{}
					pending = pending[1:]
					continue
				case <-w.stop:
				case <-db.closing:
					err = store.ErrClosed
				}
				break loop
			}
			if len(pending) > w.spare {
				err = store.ErrWatcherTooSlow
				break loop
			}
		case <-ask:
			w.mu.Lock()
			asked := w.asked
			w.asked = false
			w.mu.Unlock()
			if asked {
				db.askProgress(w.wctx)
			}
		case <-w.stop:
			break loop
		case <-db.closing:
			err = store.ErrClosed
			break loop
		}
	}
	w.cancel()
	w.stopCtx()
	w.mu.Lock()
	w.err = err
	w.waiting = true
	w.mu.Unlock()
	close(w.ch)
	if err != nil && err != store.ErrClosed && err != store.ErrWatcherTooSlow {
		db.log.Warn("watch ended", "prefix", w.prefix, "err", err)
	}
}

// event converts an etcd event with its previous document.
func (db *DB) event(ev *clientv3.Event) store.Event {
	key := db.storeKey(ev.Kv.Key)
	var prev *store.KeyValue
	if p := ev.PrevKv; p != nil {
		prev = &store.KeyValue{Key: key, Value: p.Value, CreateRevision: p.CreateRevision, ModRevision: p.ModRevision}
	}
	switch {
	case ev.Type == mvccpb.DELETE:
		obj := store.KeyValue{Key: key, ModRevision: ev.Kv.ModRevision}
		if prev != nil {
			obj = *prev
			obj.ModRevision = ev.Kv.ModRevision
		}
		return store.Event{Type: store.Deleted, Object: obj, Prev: prev}
	case ev.Kv.CreateRevision == ev.Kv.ModRevision:
		return store.Event{Type: store.Added, Object: store.KeyValue{Key: key, Value: ev.Kv.Value,
			CreateRevision: ev.Kv.CreateRevision, ModRevision: ev.Kv.ModRevision}}
	}
	return store.Event{Type: store.Modified, Prev: prev, Object: store.KeyValue{Key: key, Value: ev.Kv.Value,
		CreateRevision: ev.Kv.CreateRevision, ModRevision: ev.Kv.ModRevision}}
}

// progressTicks returns the ticks on which a watch's loop sends a progress
// request when one of its watches asked for progress (askProgress), nil
// when the server does not answer them in order, and the func that stops
// the ticks.
func (db *DB) progressTicks() (<-chan time.Time, func()) {
	if !db.progressRequests {
		return nil, func() {}
	}
	t := time.NewTicker(db.opts.ProgressInterval)
	return t.C, t.Stop
}

// askProgress sends a progress request on ctx's stream when one is due
// (progressDue), for at most ProgressInterval.
func (db *DB) askProgress(ctx context.Context) {
	if !db.progressDue() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.ProgressInterval)
	defer cancel()
	_ = db.cli.RequestProgress(ctx)
}

// progressDue reports whether a progress request may go now: every watch
// shares one gRPC stream (their contexts carry the same metadata), and etcd
// answers a request on every watch of the stream, so one request per
// ProgressInterval serves them all.
func (db *DB) progressDue() bool {
	now := time.Now().UnixNano()
	last := db.lastProgress.Load()
	return now-last >= int64(db.opts.ProgressInterval) && db.lastProgress.CompareAndSwap(last, now)
}
