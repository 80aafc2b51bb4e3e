package plugins

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/internal/httpflush"
)

// PluginsPath is where Plugins are served; a Plugin's log is served at
// PluginsPath/NAME/log.
const PluginsPath = "/apis/" + Group + "/" + Version + "/plugins"

// LogPluginName returns the Plugin whose log subresource path is, if path
// is one.
func LogPluginName(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, PluginsPath+"/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/log")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// NewLogHandler serves the log subresource of Plugins, as pods/log does:
// GET PluginsPath/NAME/log answers the plugin's recent log lines as
// text/plain, one line each (see LogLine.String). Query parameters:
// sinceTime (RFC 3339, fractional seconds allowed; inclusive) and sinceSeconds keep the newer lines, tailLines the
// last lines, object=KIND/NAME (NAME may be namespace/name) the lines about
// one object; follow=true keeps the response open and writes new lines as
// they come, until the client goes. Each batch of lines must reach the
// client within writeTimeout (the server's write timeout of watches, which
// the caller passes), as a watch's events must, or the response ends: a
// client that stops reading holds nothing for long. A Plugin that does not
// exist is a 404.
func NewLogHandler(logs *Logs, svc *engine.Service, writeTimeout time.Duration) http.Handler {
	return &logServer{logs: logs, svc: svc, writeTimeout: writeTimeout}
}

type logServer struct {
	logs *Logs
	svc  *engine.Service
	// writeTimeout bounds the write of each batch of lines.
	writeTimeout time.Duration
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := LogPluginName(r.URL.Path)
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, r.Method+" is not supported on a Plugin's log; GET it")
		return
	}
	q, follow, err := logQuery(r, time.Now())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if _, err := s.svc.Get(r.Context(), Resource, "", name, metav1.GetOptions{}); err != nil {
		if isNotFound(err) {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("plugins.%s %q not found", Group, name))
			return
		}
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	lines, next := s.logs.Lines(name, q)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	timeout := s.writeTimeout
	rc := http.NewResponseController(httpflush.ErrorFlusher(w))
	bw := bufio.NewWriter(w)
	write := func(lines []LogLine) error {
		// The deadline holds only while a batch is written: over HTTP/2 one
		// left set would end a follow idle for that long.
		deadline := rc.SetWriteDeadline(time.Now().Add(timeout)) == nil
		for _, l := range lines {
			bw.WriteString(l.String())
			bw.WriteByte('\n')
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if deadline {
			return rc.SetWriteDeadline(time.Time{})
		}
		return nil
	}
	if err := write(lines); err != nil || !follow {
		return
	}
	_ = s.logs.Follow(r.Context(), name, q, next, write)
}

// logQuery reads the query parameters of a log request; now is the clock of
// sinceSeconds.
func logQuery(r *http.Request, now time.Time) (LogQuery, bool, error) {
	v := r.URL.Query()
	var q LogQuery
	follow := false
	if f := v.Get("follow"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			return q, false, fmt.Errorf("follow=%q: want true or false", f)
		}
		follow = b
	}
	if s := v.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, false, fmt.Errorf("sinceTime=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
		}
		q.Since = t
	}
	if s := v.Get("sinceSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return q, false, fmt.Errorf("sinceSeconds=%q: want a positive integer", s)
		}
		if !q.Since.IsZero() {
			return q, false, fmt.Errorf("at most one of sinceTime or sinceSeconds may be specified")
		}
		q.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if s := v.Get("tailLines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, false, fmt.Errorf("tailLines=%q: want a non-negative integer", s)
		}
		q.Tail = n
		if n == 0 {
			q.Tail = -1 // none of the kept lines, only new ones
		}
	}
	if s := v.Get("object"); s != "" {
		kind, name, ok := strings.Cut(s, "/")
		if !ok || kind == "" || name == "" {
			return q, false, fmt.Errorf("object=%q: want KIND/NAME or KIND/NAMESPACE/NAME", s)
		}
		q.Kind, q.Name = kind, name
	}
	return q, follow, nil
}
