package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// defaultReadRecordSettle is how long after a schema change the revision of
// a CRD's read schemas is stored (kinds.ReadSchemas): longer than a write
// that took the previous schemas can take to commit (admission calls
// included). A write that commits later still raises the revision, in
// memory and in the record.
const defaultReadRecordSettle = 2 * time.Minute

// readRecordPrefix holds the records of CRDs' read schemas among the
// server's private keys.
const readRecordPrefix = store.PrivatePrefix + "crdreadschemas/"

func readRecordKey(crd string) string { return readRecordPrefix + crd }

// loadReadRecord returns the stored record of crd, nil when there is none
// or it cannot be read (the caller then takes the conservative revision).
func (s *Service) loadReadRecord(ctx context.Context, crd string) *kinds.ReadRecord {
	kv, err := s.store.Get(ctx, readRecordKey(crd), store.GetOptions{})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			s.log.Warn("read the CRD's read-schema record", "crd", crd, "err", err)
		}
		return nil
	}
	var rec kinds.ReadRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		s.log.Warn("decode the CRD's read-schema record", "crd", crd, "err", err)
		return nil
	}
	return &rec
}

// saveReadRecord stores rs's revision and fingerprint for crd, unless the
// record already says as much; concurrent saves keep the larger revision of
// the same fingerprint. A save that waits for another past ctx is dropped,
// as one the store cuts short.
func (s *Service) saveReadRecord(ctx context.Context, crd string, rs *kinds.ReadSchemas) {
	select {
	case s.readRecordSaving <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-s.readRecordSaving }()
	want := rs.Record()
	for attempt := 0; attempt < 5; attempt++ {
		kv, err := s.store.Get(ctx, readRecordKey(crd), store.GetOptions{})
		var cur kinds.ReadRecord
		switch {
		case errors.Is(err, store.ErrNotFound):
			kv = nil
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("read the CRD's read-schema record", "crd", crd, "err", err)
			}
			return
		default:
			if json.Unmarshal(kv.Value, &cur) == nil && cur.Fingerprint == want.Fingerprint && cur.Since >= want.Since {
				return
			}
		}
		b, _ := json.Marshal(want)
		if kv == nil {
			_, err = s.store.Create(ctx, readRecordKey(crd), b)
		} else {
			_, err = s.store.Update(ctx, readRecordKey(crd), b, kv.ModRevision)
		}
		if err == nil || !(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists)) {
			if err != nil && ctx.Err() == nil {
				s.log.Warn("store the CRD's read-schema record", "crd", crd, "err", err)
			}
			return
		}
	}
}

// dropReadRecord removes crd's record once the CRD is gone.
func (s *Service) dropReadRecord(ctx context.Context, crd string) {
	if _, _, err := s.store.Delete(ctx, readRecordKey(crd), 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("remove the CRD's read-schema record", "crd", crd, "err", err)
	}
}

// noteWrite records that an object of sv's kind was written at rev with sv's
// read schemas (Registry.WroteWith), and stores a raised revision.
func (s *Service) noteWrite(ctx context.Context, sv *kinds.Kind, rev int64) {
	if rs := s.reg.WroteWith(sv, rev); rs != nil && rs.Settled() {
		s.saveReadRecord(context.WithoutCancel(ctx), sv.CRD, rs)
	}
}

// recordRead stores the revision of the CRD's new read schemas rs: at once,
// within ctx, when settled, else after readSettle, if they are still the
// CRD's. A save still pending when the Service stops, or cut short by ctx,
// is dropped: the record then keeps the earlier, conservative revision.
func (s *Service) recordRead(ctx context.Context, crd string, rs *kinds.ReadSchemas) {
	if rs.Settled() {
		s.saveReadRecord(ctx, crd, rs)
		return
	}
	// The settle is the Service's work, not the caller's: it waits for no
	// context of the caller's.
	s.settleRead(context.Background(), crd, rs)
}

// settleRead settles the CRD's read schemas rs after readSettle, if they
// are still the CRD's, and saves their record; unless parent, the context
// of the settle that failed before it, has ended.
func (s *Service) settleRead(parent context.Context, crd string, rs *kinds.ReadSchemas) {
	s.delayed.after(parent, s.readSettle, func(ctx context.Context) {
		cur := s.reg.ReadOf(crd)
		if cur == nil || cur.Fingerprint() != rs.Fingerprint() {
			return // changed again, or gone: the newer change records itself
		}
		rev, err := s.store.CurrentRevision(ctx)
		if ctx.Err() != nil {
			return // stopped: dropped, as a save still waiting
		}
		if err != nil {
			// Stay unsettled (read through the schemas) and try again.
			s.log.Warn("settle the CRD's read schemas", "crd", crd, "err", err)
			s.settleRead(ctx, crd, rs)
			return
		}
		cur.Settle(rev)
		s.saveReadRecord(ctx, crd, cur)
	})
}

// delayedWork runs functions after a delay, and owns them: stop cancels
// those not started yet, ends the context of those running and waits for
// them, so that none writes to a store closed after the Service stopped
// and none holds the stop up on a store call that stalls.
type delayedWork struct {
	mu     sync.Mutex // guards timers, closed, ctx and cancel
	timers map[*time.Timer]bool
	closed bool
	// ctx is the context of the functions started since the last stop;
	// nil until the first is.
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup // one per timer in timers, and per fn running
}

// after runs fn after d, unless stop comes first, with a context that
// stop ends; after close, or with ctx ended, it does nothing. Work that
// schedules more passes its own context as ctx: once stop has ended it,
// stop does not wait for what it would add.
func (w *delayedWork) after(ctx context.Context, d time.Duration, fn func(ctx context.Context)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || ctx.Err() != nil {
		return
	}
	if w.timers == nil {
		w.timers = map[*time.Timer]bool{}
	}
	w.running.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer w.running.Done()
		w.mu.Lock()
		pending := w.timers[t] // t is set: after holds mu until it is
		delete(w.timers, t)
		if pending && w.ctx == nil {
			w.ctx, w.cancel = context.WithCancel(context.Background())
		}
		ctx := w.ctx
		w.mu.Unlock()
		if pending {
			fn(ctx)
		}
	})
	w.timers[t] = true
}

// stop cancels the work not started yet, ends the context of the work
// running and waits for it.
func (w *delayedWork) stop() {
	w.mu.Lock()
	for t := range w.timers {
		if t.Stop() {
			w.running.Done()
		}
		delete(w.timers, t)
	}
	if w.cancel != nil {
		w.cancel()
		w.ctx, w.cancel = nil, nil
	}
	w.mu.Unlock()
	w.running.Wait()
}

// close stops w for good: later work is not run.
func (w *delayedWork) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop()
}
