package serving

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// fairTestUser names the user of a request to fairServer.
const fairTestUser = "X-Test-User"

// fairServer serves Limit with opts as NewHandler places it, the user
// taken from the X-Test-User header. Requests with ?block=1 tell entered
// who they are once they have their seat and wait for a value on release.
type fairServer struct {
	*httptest.Server
	metrics *Metrics
	entered chan string
	release chan struct{}
}

func newFairServer(t *testing.T, opts LimitOptions) *fairServer {
	s := &fairServer{metrics: NewMetrics(), entered: make(chan string, 64), release: make(chan struct{})}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") != "" {
			s.entered <- r.Header.Get(fairTestUser) + " " + r.Method
			<-s.release
		}
		_, _ = w.Write([]byte("{}"))
	})
	limited := Limit(api, opts, s.metrics)
	withUser := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get(fairTestUser); name != "" {
			r = r.WithContext(request.WithUser(r.Context(), &user.DefaultInfo{Name: name}))
		}
		limited.ServeHTTP(w, r)
	})
	s.Server = httptest.NewServer(Instrument(withUser, InstrumentOptions{Logger: quiet, Metrics: s.metrics}))
	t.Cleanup(s.Close)
	return s
}

// send makes a request as name and returns its code and Retry-After.
func (s *fairServer) send(t *testing.T, name, method, path string) (int, string) {
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set(fairTestUser, name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	if resp.StatusCode == http.StatusTooManyRequests && st.Reason != metav1.StatusReasonTooManyRequests {
		t.Errorf("%s %s as %s: 429 with reason %q, want TooManyRequests", method, path, name, st.Reason)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// metricsText is the metrics as /metrics serves them.
func (s *fairServer) metricsText() string {
	w := httptest.NewRecorder()
	s.metrics.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

// waitQueued waits until n requests of class wait for a seat.
func (s *fairServer) waitQueued(t *testing.T, class string, n int) {
	t.Helper()
	testsupport.Poll(t, 10*time.Second, fmt.Sprintf("%d %s requests queued", n, class), func() (bool, string) {
		got := testutil.ToFloat64(s.metrics.queued.WithLabelValues(class))
		return got == float64(n), fmt.Sprint(got, " queued")
	})
}

const (
	fairWidgets = "/apis/example.setpoint.dev/v1/namespaces/default/widgets"
	fairBlock   = fairWidgets + "?block=1"
)

// TestLimitFairQueuing fills the write seats with one user's requests,
// queues eight more of that user and then one of another, and checks that
// the second user's request gets the second seat given back, not the
// ninth; that reads and watches are still served meanwhile; and the queue
// metrics.
func TestLimitFairQueuing(t *testing.T) {
	s := newFairServer(t, LimitOptions{MaxMutatingRequestsInflight: 2, MaxQueuedRequestsPerUser: 20})
	var wg sync.WaitGroup
	post := func(name string) {
		wg.Go(func() {
			if code, _ := s.send(t, name, "POST", fairBlock); code != http.StatusOK {
				t.Errorf("POST as %s: %d, want 200 after waiting", name, code)
			}
		})
	}
	for range 2 {
		post("alice")
		if got := <-s.entered; got != "alice POST" {
			t.Fatalf("entered %q, want alice POST", got)
		}
	}
	for i := range 8 {
		post("alice")
		s.waitQueued(t, classMutating, i+1)
	}
	post("bob")
	s.waitQueued(t, classMutating, 9)

	// The other classes are not held up by the writes.
	if code, _ := s.send(t, "alice", "GET", fairWidgets); code != http.StatusOK {
		t.Errorf("GET with every write seat taken: %d, want 200", code)
	}
	if code, _ := s.send(t, "bob", "GET", fairWidgets+"?watch=true"); code != http.StatusOK {
		t.Errorf("watch with every write seat taken: %d, want 200", code)
	}

	var order []string
	for range 9 {
		s.release <- struct{}{}
		order = append(order, <-s.entered)
	}
	close(s.release)
	wg.Wait()
	if order[0] != "alice POST" || order[1] != "bob POST" {
		t.Errorf("freed seats went to %v; want alice, then bob, whose turn came before alice's other seven", order)
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"queued now", testutil.ToFloat64(s.metrics.queued.WithLabelValues(classMutating)), 0},
		{"rejected", testutil.ToFloat64(s.metrics.rejected.WithLabelValues(classMutating)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	body := s.metricsText()
	if want := `setpoint_apiserver_queue_wait_seconds_count{execute="true",request_kind="mutating"} 9`; !strings.Contains(body, want) {
		t.Errorf("queue wait histogram lacks %s:\n%s", want, body)
	}
}

// TestLimitQueueRejects checks the 429s of the queues: at once when the
// user's queue is full, after QueueWaitTimeout when no seat comes, both
// with Retry-After, and the reasons in the metrics.
func TestLimitQueueRejects(t *testing.T) {
	s := newFairServer(t, LimitOptions{MaxRequestsInflight: 1, MaxQueuedRequestsPerUser: 1, QueueWaitTimeout: 100 * time.Millisecond})
	done := make(chan int, 2)
	go func() { code, _ := s.send(t, "alice", "GET", fairBlock); done <- code }()
	<-s.entered

	// bob waits in his queue and gets 429 once the wait is over.
	start := time.Now()
	if code, retry := s.send(t, "bob", "GET", fairWidgets); code != http.StatusTooManyRequests || retry != "1" {
		t.Errorf("GET with the seat taken past the wait: %d Retry-After %q, want 429 and 1", code, retry)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("the 429 came after %v, want it after the 100ms wait", d)
	}

	// alice's queue is full with one waiting: her next gets 429 at once.
	go func() { code, _ := s.send(t, "alice", "GET", fairWidgets); done <- code }()
	s.waitQueued(t, classReadOnly, 1)
	if code, retry := s.send(t, "alice", "GET", fairWidgets); code != http.StatusTooManyRequests || retry != "1" {
		t.Errorf("GET with the user's queue full: %d Retry-After %q, want 429 and 1", code, retry)
	}
	close(s.release)
	<-done
	<-done

	body := s.metricsText()
	for _, want := range []string{
		`setpoint_apiserver_rejected_requests_total{reason="queue-full",request_kind="readOnly"} 1`,
		`setpoint_apiserver_queued_requests{request_kind="readOnly"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	// alice's waiting request timed out too, unless the seat came first.
	timeouts := testutil.ToFloat64(s.metrics.rejectedBy.WithLabelValues(classReadOnly, reasonTimeout))
	dropped := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(classReadOnly))
	if timeouts < 1 || dropped != timeouts+1 {
		t.Errorf("%v time-outs and %v dropped, want at least 1 time-out and dropped one more (the queue-full)", timeouts, dropped)
	}
}
