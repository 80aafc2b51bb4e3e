package serving

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
)

// DefaultAuditBufferSize is how many audit events may wait for the log at
// once by default, kube-apiserver's --audit-log-batch-buffer-size.
const DefaultAuditBufferSize = 10000

// auditDropLogEvery is the least time between two log records about dropped
// audit events: a full disk must not flood the server's log as well.
const auditDropLogEvery = 10 * time.Second

// auditEncoder writes events as kube-apiserver's log backend does: the
// audit.k8s.io/v1 Event, as JSON, one per line.
var auditEncoder = audit.Codecs.LegacyCodec(auditv1.SchemeGroupVersion)

// auditSink is the audit backend: it encodes each event in the caller's
// goroutine and hands the line to a bounded buffer, which one goroutine
// (started by newAuditSink, stopped by close) writes to out. When the
// buffer is full (out is slow, or its disk is full and writes fail slowly)
// the event is dropped, counted and logged at most every
// auditDropLogEvery: a request never waits for the audit log.
type auditSink struct {
	out     io.Writer
	log     *slog.Logger
	lines   chan []byte
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once

	// mu guards sending on lines against close: a send after close is
	// dropped rather than left in a buffer nobody drains.
	mu     sync.RWMutex
	closed bool

	written, dropped, failed prometheus.Counter
	// pending counts the lines buffered and not yet written (the one
	// being written included).
	pending atomic.Int64
	// droppedSince counts the drops not yet logged; lastDropLog is when
	// the last record about them was logged (UnixNano).
	droppedSince atomic.Int64
	lastDropLog  atomic.Int64
}

var _ audit.Sink = (*auditSink)(nil)

func newAuditSink(out io.Writer, size int, log *slog.Logger, reg prometheus.Registerer) (*auditSink, error) {
	s := &auditSink{
		out:     out,
		log:     log,
		lines:   make(chan []byte, size),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "audit", Name: "events_total",
			Help: "Audit events written to the audit log.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "audit", Name: "events_dropped_total",
			Help: "Audit events dropped because the audit log's buffer was full (the log is slower than the requests) or the server was stopping.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "audit", Name: "write_errors_total",
			Help: "Audit events the audit log failed to write (a full disk, for instance).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{s.written, s.dropped, s.failed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	go s.run()
	return s, nil
}

// ProcessEvents implements audit.Sink. It always reports success: an event
// that cannot be buffered is dropped and counted, and the request goes on,
// as with kube-apiserver's batch mode.
func (s *auditSink) ProcessEvents(events ...*auditinternal.Event) bool {
	for _, ev := range events {
		line, err := runtime.Encode(auditEncoder, ev)
		if err != nil {
			s.failed.Inc()
			s.log.Error("audit event not encoded", "audit_id", string(ev.AuditID), "err", err)
			continue
		}
		s.offer(line)
	}
	return true
}

// offer buffers line, or drops it when the buffer is full or closed.
func (s *auditSink) offer(line []byte) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.closed {
		s.pending.Add(1)
		select {
		case s.lines <- line:
			return
		default:
			s.pending.Add(-1)
		}
	}
	s.dropped.Inc()
	s.droppedSince.Add(1)
	now := time.Now().UnixNano()
	last := s.lastDropLog.Load()
	if now-last >= int64(auditDropLogEvery) && s.lastDropLog.CompareAndSwap(last, now) {
		s.log.Warn("audit events dropped: the audit log is not keeping up (slow or full disk)",
			"dropped", s.droppedSince.Swap(0), "buffer", cap(s.lines))
	}
}

// run writes buffered lines to out until close, then what is left.
func (s *auditSink) run() {
	defer close(s.stopped)
	for {
		select {
		case line := <-s.lines:
			s.write(line)
		case <-s.stop:
			for {
				select {
				case line := <-s.lines:
					s.write(line)
				default:
					return
				}
			}
		}
	}
}

func (s *auditSink) write(line []byte) {
	_, err := s.out.Write(line)
	s.pending.Add(-1)
	if err != nil {
		s.failed.Inc()
		now := time.Now().UnixNano()
		last := s.lastDropLog.Load()
		if now-last >= int64(auditDropLogEvery) && s.lastDropLog.CompareAndSwap(last, now) {
			s.log.Error("audit log write failed", "err", err)
		}
		return
	}
	s.written.Inc()
}

// close stops buffering, writes what the buffer holds and waits for the
// writer. It is idempotent.
func (s *auditSink) close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
	})
	<-s.stopped
}
