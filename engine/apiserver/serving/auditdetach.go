package serving

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
)

// detachSink is the sink of the audited requests: it holds back the
// ResponseComplete event of a request whose connection is detached (see
// Detach) until the connection ends, and stamps it then, so that the event
// comes when the response completes, as it would had the handler served the
// connection to its end.
type detachSink struct {
	audit.Sink

	mu   sync.Mutex // guards reqs
	reqs map[types.UID]*lifetime
}

var _ audit.Sink = (*detachSink)(nil)

// watch makes the events of the request with audit ID id wait for lt's
// end; the returned function stops that.
func (s *detachSink) watch(id types.UID, lt *lifetime) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqs == nil {
		s.reqs = make(map[types.UID]*lifetime)
	}
	s.reqs[id] = lt
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.reqs, id)
	}
}

// holds tells whether any of events may have to wait: a ResponseComplete
// event while some request may detach.
func (s *detachSink) holds(events []*auditinternal.Event) bool {
	s.mu.Lock()
	n := len(s.reqs)
	s.mu.Unlock()
	if n == 0 {
		return false
	}
	for _, ev := range events {
		if ev.Stage == auditinternal.StageResponseComplete {
			return true
		}
	}
	return false
}

func (s *detachSink) lookup(id types.UID) *lifetime {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[id]
}

func (s *detachSink) ProcessEvents(events ...*auditinternal.Event) bool {
	if !s.holds(events) {
		return s.Sink.ProcessEvents(events...)
	}
	ok := true
	for _, ev := range events {
		if ev.Stage == auditinternal.StageResponseComplete {
			if lt := s.lookup(ev.AuditID); lt != nil {
				held := ev.DeepCopy()
				if lt.later(func() {
					held.StageTimestamp = metav1.NewMicroTime(time.Now())
					s.Sink.ProcessEvents(held)
				}) {
					continue
				}
			}
		}
		ok = s.Sink.ProcessEvents(ev) && ok
	}
	return ok
}
