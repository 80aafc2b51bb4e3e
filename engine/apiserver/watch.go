package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
	"github.com/setpoint-dev/setpoint/store"
)

// watchAcceptParam is the query parameter that a WebSocket watch may carry
// in place of the Accept header, which a browser cannot set on a WebSocket
// (Kubernetes has no such parameter: kubernetes/kubernetes#83961).
const watchAcceptParam = "accept"

// newSlowWatchesClosed is the count of the watches the server ended because
// their client stopped reading: over HTTP, events that did not reach the
// client within WatchWriteTimeout; over WebSocket, a send queue that filled
// (wswatch.ErrTooSlow) or a write past its deadline; over both, a watch the
// store ended for falling behind its events (store.ErrWatcherTooSlow, sent
// as 410 Expired).
func newSlowWatchesClosed() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "setpoint",
		Subsystem: "apiserver",
		Name:      "slow_watches_closed_total",
		Help:      "Watches ended because their client did not read their events in time, by transport (http, websocket).",
	}, []string{"transport"})
}

// watch streams events: over WebSocket when the request asks for an
// upgrade, else as chunked JSON, one meta/v1 WatchEvent per line. Both
// streams convert objects the same way when the client asked for Tables or
// PartialObjectMetadata (see watchConversion). A watch that cannot start
// from the requested resourceVersion (410) is reported as one ERROR event,
// as Kubernetes does, so that clients re-list.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, t target, opts metav1.ListOptions) error {
	upgrade := wswatch.IsUpgrade(r)
	if upgrade {
		r = withAcceptParam(r)
	}
	conv, convErr := s.watchConversion(r, t)
	// The watch, once started: its end tells whether the store cut it off.
	var wi watch.Interface
	start := func(ctx context.Context) (watch.Interface, error) {
		var err error
		wi, err = s.eng.Watch(ctx, t.gvr(), t.namespace, opts)
		return wi, err
	}
	if upgrade {
		if convErr != nil {
			// Reported after the upgrade, as one ERROR event, like any
			// other error in starting the watch.
			start = func(context.Context) (watch.Interface, error) { return nil, convErr }
		}
		// ended is called once the session has ended and stopped its
		// watch: a watch the store cut off ends the session normally, its
		// last event the ERROR that says so.
		ended := func(err error) {
			s.slowEnd("websocket", t, errors.Is(err, wswatch.ErrTooSlow) || errors.Is(err, os.ErrDeadlineExceeded), fellBehind(wi))
			if err != nil {
				s.log.Debug("websocket watch ended", "resource", t.gvr().Resource, "err", err)
			}
		}
		// Once upgraded, the connection lives on in goroutines of its own
		// and this handler returns, so that an idle watch holds neither
		// the request's goroutine nor the HTTP server's buffers; the
		// serving layers count the request until the connection ends.
		ctx, end, ok := serving.Detach(r.Context())
		if !ok {
			ended(s.ws.ServeConverted(w, r, start, conv))
			return nil
		}
		if err := s.ws.Open(ctx, w, r, start, conv, func(err error) { ended(err); end() }); err != nil {
			end()
			ended(err)
		}
		return nil
	}
	if convErr != nil {
		return convErr
	}
	_, err := start(r.Context())
	if err != nil {
		if st := statusOf(err); st.Code != http.StatusGone {
			return err
		}
	}
	// Each batch of events must reach the client within
	// WatchWriteTimeout, or the watch ends: a client that stops reading
	// must not keep what its watch holds (the initial list it has not
	// taken, the store's backlog) for ever, as the WebSocket server drops
	// one whose queue fills. The deadline holds only while a write is
	// under way: over HTTP/2 a deadline left set resets the stream when
	// it passes, writing or not, which would end every watch idle for
	// that long.
	writeTimeout := s.opts.WatchWriteTimeout
	if d, ok := serving.WatchWriteTimeout(r.Context()); ok {
		writeTimeout = d
	}
	hs := newHTTPStream(w, writeTimeout)
	rc := hs.rc
	hs.deadlines = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) == nil
	// Counted once the watch has ended and stopped (Err is then known).
	defer func() { s.slowEnd("http", t, hs.missed(), fellBehind(wi)) }()
	if hs.deadlines {
		// The connection outlives the watch under keep-alive.
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	if err != nil {
		st := statusOf(err)
		if b, err := wswatch.EncodeEvent(watch.Event{Type: watch.Error, Object: &st}); err == nil {
			hs.writeOne(b)
		}
		hs.stop()
		return nil
	}
	if hs.flusher {
		_ = rc.Flush()
	}
	if hs.deadlines {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	// The watch's goroutine encodes each event, once for every watch that
	// sends the same one (converted when the client asked for Tables or
	// metadata), and writes it, a flush per burst; this one waits for the
	// watch to end: the client went away, a write failed or missed its
	// deadline, the store ended the watch, or its time is up.
	ew := newEventWriter(r.Context(), s, conv, hs)
	wait := ew.start(wi)
	<-ew.done
	wi.Stop()
	wait()
	hs.stop()
	return nil
}

var newline = []byte{'\n'}

// slowEnd counts and logs a watch over transport that ended for its
// client's slowness: missed, its events did not reach the client in time
// (a write past its deadline, a full send queue); behind, the store ended
// it for falling behind the store's events.
func (s *Server) slowEnd(transport string, t target, missed, behind bool) {
	if !missed && !behind {
		return
	}
	s.slowClosed.WithLabelValues(transport).Inc()
	cause := "write timeout"
	if behind {
		cause = "fell behind"
	}
	s.log.Debug("watch client not reading; watch ended", "transport", transport, "resource", t.gvr().Resource, "cause", cause)
}

// fellBehind tells whether wi, ended and stopped, was ended by the store
// for falling behind its events: the engine's watch reports the store's
// error (store.ErrWatcherTooSlow, whichever backend), not only the ERROR
// event it sent the client. False for a nil wi (the watch did not start).
func fellBehind(wi watch.Interface) bool {
	e, ok := wi.(interface{ Err() error })
	return ok && errors.Is(e.Err(), store.ErrWatcherTooSlow)
}

// watchConversion returns what turns each event of a watch into what the
// request's Accept header asked for, as Kubernetes' watch does; a zero
// Conversion when the client wants the objects themselves:
//
//   - as=PartialObjectMetadata (g=meta.k8s.io, v=v1): each object becomes
//     a PartialObjectMetadata, its metadata alone;
//   - as=Table: each object becomes a Table of one row with the kind's
//     printer columns, its row object according to includeObject
//     (PartialObjectMetadata by default). Only the first event's Table
//     carries the column definitions, as Kubernetes sends them (kubectl
//     keeps the last ones it saw).
//
// Bookmarks are converted too (a client that asked for Tables can decode
// them; their resourceVersion is the Table's); ERROR events keep their
// Status. The PartialObjectMetadata conversion is a function of the event,
// so WebSocket connections that ask for it share encoded events; a Table
// watch's events are encoded for its connection alone.
func (s *Server) watchConversion(r *http.Request, t target) (wswatch.Conversion, error) {
	switch {
	case wantsPartial(r):
		return wswatch.Conversion{Convert: partialEvent, Format: "PartialObjectMetadata"}, nil
	case acceptParams(r, "Table") != nil:
		var topts metav1.TableOptions
		if err := decodeParams(r, &topts); err != nil {
			return wswatch.Conversion{}, err
		}
		switch topts.IncludeObject {
		case "", metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
		default:
			// Kubernetes refuses it before the watch starts, as here.
			return wswatch.Conversion{}, apierrors.NewBadRequest(fmt.Sprintf(
				"Unable to convert to Table as requested: includeObject: Unsupported value: %q: supported values: %q, %q, %q",
				topts.IncludeObject, metav1.IncludeMetadata, metav1.IncludeNone, metav1.IncludeObject))
		}
		headers := true // only Convert, called by one goroutine at a time, uses it
		return wswatch.Conversion{Convert: func(ev watch.Event) (watch.Event, error) {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Error {
				return ev, nil
			}
			tbl, err := s.table(r, t, u)
			if err != nil {
				return ev, err
			}
			if !headers {
				tbl.ColumnDefinitions = nil
			}
			headers = false
			ev.Object = tbl
			return ev, nil
		}}, nil
	}
	return wswatch.Conversion{}, nil
}

// partialEvent is ev with its object reduced to a PartialObjectMetadata.
func partialEvent(ev watch.Event) (watch.Event, error) {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error {
		ev.Object = partialMetadata(u)
	}
	return ev, nil
}

// withAcceptParam returns r with the value of its watchAcceptParam query
// parameter, when it has one, as its Accept header.
func withAcceptParam(r *http.Request) *http.Request {
	v := r.URL.Query().Get(watchAcceptParam)
	if v == "" {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Set("Accept", v)
	return r
}
