package apiserver

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// watch streams events: over WebSocket when the request asks for an
// upgrade, else as chunked JSON, one meta/v1 WatchEvent per line. Objects are
// Tables when the client asked for them. A watch that cannot start from the
// requested resourceVersion (410) is reported as one ERROR event, as
// Kubernetes does, so that clients re-list.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, t target, opts metav1.ListOptions) error {
	asTable := acceptParams(r, "Table") != nil
	partial := wantsPartial(r)
	start := func(ctx context.Context) (watch.Interface, error) {
		return s.eng.Watch(ctx, t.gvr(), t.namespace, opts)
	}
	if wswatch.IsUpgrade(r) {
		if err := s.ws.Serve(w, r, start); err != nil {
			s.log.Debug("websocket watch ended", "resource", t.gvr().Resource, "err", err)
		}
		return nil
	}
	wi, err := start(r.Context())
	if err != nil {
		if st := statusOf(err); st.Code != http.StatusGone {
			return err
		}
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	write := func(ev watch.Event) bool {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok && partial && ev.Type != watch.Error {
			ev.Object = partialMetadata(u)
		} else if asTable {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Bookmark {
				tbl, err := s.table(r, t, u)
				if err != nil {
					st := statusOf(err)
					ev = watch.Event{Type: watch.Error, Object: &st}
				} else {
					ev.Object = tbl
				}
			}
		}
		b, err := wswatch.EncodeEvent(ev)
		if err != nil {
			s.log.Error("encode watch event", "err", err)
			return false
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if err != nil {
		st := statusOf(err)
		write(watch.Event{Type: watch.Error, Object: &st})
		return nil
	}
	defer wi.Stop()
	if flusher != nil {
		flusher.Flush()
	}
	for ev := range wi.ResultChan() {
		if !write(ev) {
			return nil
		}
	}
	return nil
}
