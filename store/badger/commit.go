package badger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	bdg "github.com/dgraph-io/badger/v4"

	"github.com/setpoint-dev/setpoint/store"
)

type writeOp uint8

const (
	opCreate writeOp = iota + 1
	opUpdate
	opDelete
)

// writeReq is one write waiting for a group commit.
type writeReq struct {
	op       writeOp
	key      string
	value    []byte
	expected int64
	done     chan writeResult // buffered 1
}

type writeResult struct {
	rev  int64
	prev *store.KeyValue // for delete: the document as it was
	err  error
	lead bool // not a result: the receiver is the new leader
}

// errFailed marks a store whose write path failed; it must be reopened.
var errFailed = errors.New("store/badger: a write failed; reopen the store")

// Create stores value under key at the next revision.
func (db *DB) Create(ctx context.Context, key string, value []byte) (int64, error) {
	r, err := db.write(ctx, opCreate, key, value, 0)
	return r.rev, err
}

// Update replaces the document under key, comparing its revision with
// expectedRevision when that is not 0.
func (db *DB) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	r, err := db.write(ctx, opUpdate, key, value, expectedRevision)
	return r.rev, err
}

// Delete removes the document under key, comparing its revision with
// expectedRevision when that is not 0. It returns the document as it was
// before the delete and the delete's revision.
func (db *DB) Delete(ctx context.Context, key string, expectedRevision int64) (*store.KeyValue, int64, error) {
	r, err := db.write(ctx, opDelete, key, nil, expectedRevision)
	return r.prev, r.rev, err
}

func (db *DB) write(ctx context.Context, op writeOp, key string, value []byte, expected int64) (writeResult, error) {
	if key == "" {
		return writeResult{}, errors.New("store/badger: empty key")
	}
	if expected < 0 {
		return writeResult{}, fmt.Errorf("store/badger: negative expected revision %d", expected)
	}
	if err := ctx.Err(); err != nil {
		return writeResult{}, err
	}
	if p := db.failed.Load(); p != nil {
		return writeResult{}, *p
	}
	if err := db.sound(); err != nil {
		return writeResult{}, err
	}
	req := &writeReq{op: op, key: key, expected: expected, done: make(chan writeResult, 1)}
	if op != opDelete {
		// The store and its watchers keep the document; the caller may reuse its slice.
		req.value = append(make([]byte, 0, len(value)), value...)
	}
	q := &db.queue
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return writeResult{}, store.ErrClosed
	}
	q.pending = append(q.pending, req)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	// Once queued, a write is always committed or failed: the context no
	// longer cancels it. But the caller need not wait for a disk that has
	// stopped completing writes: when ctx ends first, write returns
	// ErrWriteTimedOut and a goroutine takes over the write's part in the
	// group commit (leading it, or waiting its turn to lead).
	if ctx.Done() == nil {
		r := db.finish(req, lead)
		return r, r.err
	}
	if !lead {
		select {
		case r := <-req.done:
			if !r.lead {
				return r, r.err
			}
		case <-ctx.Done():
			go db.finish(req, false)
			return writeResult{}, writeTimedOut(ctx)
		}
	}
	// The leader commits on a goroutine of its own, so that its caller can
	// leave when the disk stalls; one per group, not per write.
	res := make(chan writeResult, 1)
	go func() { res <- db.lead(req) }()
	select {
	case r := <-res:
		return r, r.err
	case <-ctx.Done():
		return writeResult{}, writeTimedOut(ctx)
	}
}

// finish waits for req's outcome, leading the group commit when handed
// the lead (or when lead is set).
func (db *DB) finish(req *writeReq, lead bool) writeResult {
	if !lead {
		r := <-req.done
		if !r.lead {
			return r
		}
	}
	return db.lead(req)
}

// writeTimedOut is the error of a queued write whose caller's context
// ended: the write stays queued and may still be committed.
func writeTimedOut(ctx context.Context) error {
	return fmt.Errorf("store/badger: %w: %w", store.ErrWriteTimedOut, context.Cause(ctx))
}

// writeQueue holds the writes waiting for a group commit. At most one writer
// goroutine, the leader, commits at a time: it takes the pending writes,
// commits them as one group, and goes on until its own write is done; then it
// hands the lead to the oldest waiting writer. A single writer thus commits
// its own write with no goroutine switch.
type writeQueue struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu; broadcast when leading becomes false
	pending []*writeReq
	leading bool
	closed  bool
}

// lead commits groups until self is committed, then passes the lead on.
func (db *DB) lead(self *writeReq) writeResult {
	q := &db.queue
	done := false
	for {
		q.mu.Lock()
		if done {
			if len(q.pending) == 0 {
				q.leading = false
				q.cond.Broadcast()
				q.mu.Unlock()
			} else {
				next := q.pending[0]
				q.mu.Unlock()
				next.done <- writeResult{lead: true}
			}
			return <-self.done
		}
		n, size := 0, 0
		for n < len(q.pending) && n < db.opts.MaxBatch && (n == 0 || size < db.opts.MaxBatchBytes) {
			size += len(q.pending[n].value)
			n++
		}
		batch := append([]*writeReq(nil), q.pending[:n]...)
		q.pending = append(q.pending[:0], q.pending[n:]...)
		q.mu.Unlock()
		db.commitGroup(batch)
		for _, r := range batch {
			done = done || r == self
		}
	}
}

// stopWrites refuses new writes and waits until every queued one is done.
func (db *DB) stopWrites() {
	q := &db.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for q.leading {
		q.cond.Wait()
	}
}

// keyState is what the leader knows of a key while it builds a group.
type keyState struct {
	kv     store.KeyValue
	exists bool
}

// commitGroup checks, orders, writes and acknowledges one group.
func (db *DB) commitGroup(batch []*writeReq) {
	refuse := func(err error) {
		for _, r := range batch {
			r.done <- writeResult{err: err}
		}
	}
	if p := db.failed.Load(); p != nil {
		refuse(*p)
		return
	}
	if err := db.sound(); err != nil {
		refuse(err)
		return
	}
	// Against a concurrent reopenWritable (space.go); Close waits for the
	// write leader before it takes closeMu.
	db.closeMu.RLock()
	events, ok := db.commitLocked(batch)
	db.closeMu.RUnlock()
	if ok && len(events) > 0 {
		// Blocks only while the notifier is behind by a few groups: that is
		// the back-pressure that keeps memory bounded. Never blocks on a watcher.
		db.notifyCh <- events
	}
}

// commitLocked is commitGroup's work under closeMu. It returns the events
// to hand to the notifier, and whether the group was committed.
func (db *DB) commitLocked(batch []*writeReq) (events []store.Event, committed bool) {
	answered := false
	defer func() {
		// A panic here (from Badger) leaves the disk state of the group
		// unknown: fail the store rather than the process, and answer the
		// group's writers so that none waits forever.
		if p := recover(); p != nil {
			ferr := fmt.Errorf("%w: panic: %v", errFailed, p)
			db.failed.Store(&ferr)
			db.log.Error("store write panicked; refusing further writes", "err", ferr)
			if !answered {
				for _, r := range batch {
					r.done <- writeResult{err: ferr}
				}
			}
		}
	}()
	base := db.committed.Load()
	next := base + 1
	results := make([]writeResult, len(batch))
	events = make([]store.Event, 0, len(batch))
	seen := make(map[string]*keyState, len(batch))
	txn := db.bdb.NewTransactionAt(uint64(base), false)
	lookup := func(key string) (*keyState, error) {
		if st, ok := seen[key]; ok {
			return st, nil
		}
		st := &keyState{}
		item, err := txn.Get(objectKey(key))
		switch {
		case errors.Is(err, bdg.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			raw, err := item.ValueCopy(nil)
			if err != nil {
				return nil, err
			}
			c, v, err := decodeObject(raw)
			if err != nil {
				return nil, err
			}
			st.kv = store.KeyValue{Key: key, Value: v, CreateRevision: c, ModRevision: int64(item.Version())}
			st.exists = true
		}
		seen[key] = st
		return st, nil
	}
	var record []byte
	for i, r := range batch {
		st, err := lookup(r.key)
		if err != nil {
			results[i].err = db.readFailed(fmt.Errorf("read %q: %w", r.key, err))
			continue
		}
		switch {
		case r.op == opCreate && st.exists:
			results[i].err = fmt.Errorf("store/badger: create %q: %w", r.key, store.ErrAlreadyExists)
			continue
		case r.op != opCreate && !st.exists:
			results[i].err = fmt.Errorf("store/badger: %q: %w", r.key, store.ErrNotFound)
			continue
		case r.op != opCreate && r.expected != 0 && r.expected != st.kv.ModRevision:
			results[i].err = fmt.Errorf("store/badger: %q at revision %d, expected %d: %w",
				r.key, st.kv.ModRevision, r.expected, store.ErrConflict)
			continue
		}
		rev := next
		next++
		var ev store.Event
		switch r.op {
		case opCreate:
			ev = store.Event{Type: store.Added, Object: store.KeyValue{Key: r.key, Value: r.value, CreateRevision: rev, ModRevision: rev}}
			st.kv, st.exists = ev.Object, true
		case opUpdate:
			prev := st.kv
			ev = store.Event{Type: store.Modified, Prev: &prev,
				Object: store.KeyValue{Key: r.key, Value: r.value, CreateRevision: prev.CreateRevision, ModRevision: rev}}
			st.kv = ev.Object
		case opDelete:
			prev := st.kv
			obj := prev
			obj.ModRevision = rev
			ev = store.Event{Type: store.Deleted, Object: obj, Prev: &prev}
			results[i].prev = &prev
			st.kv, st.exists = store.KeyValue{}, false
		}
		results[i].rev = rev
		events = append(events, ev)
		record = appendRecordEvent(record, &ev)
	}
	txn.Discard()

	if len(events) > 0 {
		// The writes that passed their checks need space; the others have
		// their answer (a create of an existing key is still a conflict).
		if err := db.checkWriteSpace(2 * int64(len(record))); err != nil {
			answered = true
			for i, r := range batch {
				if results[i].err == nil {
					results[i] = writeResult{err: err}
				}
				r.done <- results[i]
			}
			return nil, false
		}
		last := next - 1
		if err := db.persist(record, events, last); err != nil {
			db.log.Error("store write failed; refusing further writes", "rev", last, "err", err)
			ferr := fmt.Errorf("%w: %w", errFailed, err)
			db.failed.Store(&ferr)
			answered = true
			for _, r := range batch {
				r.done <- writeResult{err: ferr}
			}
			return nil, false
		}
		db.committed.Store(last)
	}
	answered = true
	for i, r := range batch {
		r.done <- results[i]
	}
	return events, true
}

// persist writes a group durably; see writeGroup.
func (db *DB) persist(record []byte, events []store.Event, last int64) error {
	if fault := db.writeFault; fault != nil {
		if err := fault(last); err != nil {
			return err
		}
	}
	evs := make([]recordEvent, len(events))
	for i := range events {
		o := &events[i].Object
		evs[i] = recordEvent{typ: events[i].Type, rev: o.ModRevision, createRev: o.CreateRevision, key: o.Key, value: o.Value}
	}
	return db.writeGroup(record, evs, last)
}
