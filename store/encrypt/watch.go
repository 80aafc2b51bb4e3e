package encrypt

import (
	"context"
	"sync"

	"github.com/setpoint-dev/setpoint/store"
)

// relay is a watch whose events are decrypted on their way from the
// wrapped watcher. Its goroutine (run) owns the events in flight: it takes
// each from the wrapped watcher, decrypts it and puts it in ch, and answers
// Progress itself, so that an answer never counts an event it holds. A
// value that cannot be decrypted ends the watch with ErrDecrypt.
type relay struct {
	s     *Store
	inner store.Watcher
	ch    chan store.Event
	// progress carries Progress's questions to run.
	progress chan chan progressAnswer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when run has returned

	mu  sync.Mutex
	err error // why ch closed, besides the wrapped watcher's; guarded by mu
}

type progressAnswer struct {
	rev int64
	ok  bool
}

var _ store.Watcher = (*relay)(nil)

func newRelay(ctx context.Context, s *Store, w store.Watcher) *relay {
	r := &relay{
		s: s, inner: w,
		ch:       make(chan store.Event, cap(w.Events())),
		progress: make(chan chan progressAnswer),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go r.run(context.WithoutCancel(ctx))
	return r
}

func (r *relay) run(ctx context.Context) {
	defer close(r.done)
	defer close(r.ch)
	in := r.inner.Events()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			if err := r.decrypt(ctx, &ev); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				r.inner.Stop()
				return
			}
			if !r.send(ev) {
				return
			}
		case q := <-r.progress:
			q <- r.answer()
		case <-r.stop:
			return
		}
	}
}

// send puts ev in ch; false when the watch was stopped first. Progress
// asked meanwhile gets no answer it could misread: an event is held.
func (r *relay) send(ev store.Event) bool {
	for {
		select {
		case r.ch <- ev:
			return true
		case q := <-r.progress:
			q <- progressAnswer{}
		case <-r.stop:
			return false
		}
	}
}

// answer is the wrapped watcher's progress when run holds no event and none
// waits in the wrapped channel: every event up to it is then in ch.
func (r *relay) answer() progressAnswer {
	rev, ok := r.inner.Progress()
	if !ok || len(r.inner.Events()) > 0 {
		return progressAnswer{}
	}
	return progressAnswer{rev: rev, ok: true}
}

func (r *relay) decrypt(ctx context.Context, ev *store.Event) error {
	obj, err := r.s.decrypt(ctx, &ev.Object)
	if err != nil {
		return err
	}
	ev.Object = *obj
	if ev.Prev != nil {
		if ev.Prev, err = r.s.decrypt(ctx, ev.Prev); err != nil {
			return err
		}
	}
	return nil
}

func (r *relay) Events() <-chan store.Event { return r.ch }

func (r *relay) Err() error {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.inner.Err()
}

func (r *relay) Progress() (int64, bool) {
	q := make(chan progressAnswer, 1)
	select {
	case r.progress <- q:
		a := <-q
		return a.rev, a.ok
	case <-r.done:
		return 0, false
	}
}

func (r *relay) Stop() {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.inner.Stop()
	})
	<-r.done
}
