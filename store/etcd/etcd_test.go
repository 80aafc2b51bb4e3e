package etcd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/store/storetest"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// prefixes numbers the prefixes of the stores one etcd holds.
var prefixes atomic.Int64

// etcds hands out the etcd the conformance stores open on: each store gets
// a prefix of its own on a shared etcd (the suite runs its tests one at a
// time, so the revisions each sees are its own writes), and a fresh etcd
// once a store has compacted, since etcd's history is global and the suite
// expects a new store to keep its history from revision 1.
type etcds struct {
	t         *testing.T
	srv       *etcdtest.Server
	compacted atomic.Bool
}

func (e *etcds) opener(buffer int) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		if e.srv == nil || e.compacted.Swap(false) {
			if e.srv != nil {
				e.srv.Stop() // its stores are closed: the suite closes each at its test's end
			}
			e.srv = etcdtest.Start(e.t, etcdtest.Options{})
		}
		db, err := etcd.Open(etcd.Options{
			Endpoints:          []string{e.srv.Endpoint},
			Prefix:             fmt.Sprintf("/test%d", prefixes.Add(1)),
			WatchBuffer:        buffer,
			CompactionInterval: -1,
		})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return compactNoting{db, &e.compacted}
	}
}

// compactNoting notes that its etcd's history was compacted.
type compactNoting struct {
	*etcd.DB
	compacted *atomic.Bool
}

func (c compactNoting) Compact(ctx context.Context, rev int64) error {
	c.compacted.Store(true)
	return c.DB.Compact(ctx, rev)
}

func TestConformance(t *testing.T) {
	e := &etcds{t: t}
	storetest.Run(t, e.opener(1024), storetest.Capabilities{
		NewSlowWatchStore: e.opener(16),
		SlowWatchBuffer:   16,
	})
}

// TestPrefixIsolation: two stores on one etcd under prefixes where one is
// the start of the other see only their own keys, in lists and watches.
func TestPrefixIsolation(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(prefix string) *etcd.DB {
		db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, Prefix: prefix, CompactionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open("/sp"), open("/sp2/")
	w, err := a.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := b.Create(ctx, "/g/r/x", []byte("b")); err != nil {
		t.Fatal(err)
	}
	rev, err := a.Create(ctx, "/g/r/x", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*etcd.DB{a, b} {
		res, err := st.List(ctx, "", store.ListOptions{})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("List: %v, %+v; want one item", err, res)
		}
	}
	select {
	case ev := <-w.Events():
		if ev.Revision() != rev || string(ev.Object.Value) != "a" {
			t.Errorf("watch of /sp saw %+v, want the create at %d", ev, rev)
		}
	case <-ctx.Done():
		t.Fatal("no event")
	}
	if _, err := a.Create(ctx, "no-slash", nil); err == nil {
		t.Errorf("Create of a key without a leading slash succeeded")
	}
}

// TestTooLarge: a document over etcd's request limit fails with ErrTooLarge
// and a message that says so; a larger --max-request-bytes lets it through.
func TestTooLarge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := make([]byte, 2<<20)
	for _, tt := range []struct {
		name    string
		max     int
		wantErr error
	}{
		{"default limit", 0, etcd.ErrTooLarge},
		{"raised limit", 4 << 20, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := etcdtest.Start(t, etcdtest.Options{MaxRequestBytes: tt.max})
			db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = db.Create(ctx, "/g/r/big", big)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Create of 2 MiB: %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "max-request-bytes") {
				t.Errorf("error %q does not name the limit", err)
			}
		})
	}
}

// TestProgress: a watch of a quiet prefix learns the revision of writes
// elsewhere, from etcd's periodic progress notifications (here every 100
// ms, etcd's --experimental-watch-progress-notify-interval) or from
// progress requests (with etcd's default interval of 10 minutes), with
// nothing missed.
func TestProgress(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		requests bool
	}{
		{"notifications", 100 * time.Millisecond, false},
		{"requests", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := etcdtest.Start(t, etcdtest.Options{ProgressNotifyInterval: tt.interval})
			db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1,
				ProgressInterval: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			etcd.SetProgressRequests(db, tt.requests)
			testProgress(t, db)
		})
	}
}

func testProgress(t *testing.T, db *etcd.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := db.Watch(ctx, "/g/quiet/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last int64
	for i := range 5 {
		if last, err = db.Create(ctx, fmt.Sprintf("/g/busy/%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Poll(t, 10*time.Second, fmt.Sprint("Progress ", last, " or more"), func() (bool, string) {
		p, ok := w.Progress()
		return ok && p >= last, fmt.Sprintf("Progress %d, %v", p, ok)
	})
	select {
	case ev := <-w.Events():
		t.Errorf("quiet watch got %+v", ev)
	default:
	}
}

// TestClosedEtcd: with etcd gone, requests fail within their deadline
// rather than hang.
func TestClosedEtcd(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv.Stop()
	start := time.Now()
	_, err = db.Create(context.Background(), "/g/r/x", []byte("x"))
	if !errors.Is(err, etcd.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create with etcd stopped: %v, want ErrUnavailable and the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Create took %v with etcd stopped", d)
	}
	t.Logf("Create with etcd stopped: %v after %v", err, time.Since(start).Round(time.Millisecond))
}

// TestCloseEndsRequests: Close returns at once while a request waits for
// an etcd that does not answer, and the request fails with ErrClosed.
func TestCloseEndsRequests(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	errc := make(chan error, 1)
	go func() {
		_, err := db.Create(context.Background(), "/g/r/x", []byte("x"))
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond) // the Create is waiting for etcd
	start := time.Now()
	if err := db.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, store.ErrClosed) {
		t.Errorf("Create cut short by Close: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a request waiting", d)
	}
}

// TestWatchAcrossEtcdRestart: when etcd restarts under a watch, the watch
// either goes on or ends with an error; watching again from the last event
// received gives the rest, with no gap and no duplicate.
func TestWatchAcrossEtcdRestart(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, CompactionInterval: -1, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	from, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write := func(i int) int64 {
		t.Helper()
		for {
			rev, err := db.Create(ctx, fmt.Sprintf("/g/r/%02d", i), []byte("x"))
			if err == nil {
				return rev
			}
			if ctx.Err() != nil {
				t.Fatalf("Create %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond) // etcd is starting again
		}
	}
	w, err := db.Watch(ctx, "/g/", from)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		write(i)
	}
	srv.Stop()
	if err := srv.Restart(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 5; i < 10; i++ {
		last = write(i)
	}
	got := from
	restarts := 0
	for got < last {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Logf("watch ended at %d: %v; watching again", got, w.Err())
				if restarts++; restarts > 5 {
					t.Fatalf("watch ended %d times", restarts)
				}
				for w, err = db.Watch(ctx, "/g/", got); err != nil; w, err = db.Watch(ctx, "/g/", got) {
					if ctx.Err() != nil {
						t.Fatalf("Watch from %d: %v", got, err)
					}
					time.Sleep(100 * time.Millisecond)
				}
				continue
			}
			if ev.Revision() != got+1 {
				t.Fatalf("event at %d after %d", ev.Revision(), got)
			}
			got = ev.Revision()
		case <-ctx.Done():
			t.Fatalf("events up to %d, want %d", got, last)
		}
	}
	w.Stop()
}

// TestTLS: a store reaches an etcd that requires client certificates with
// one, and Open fails within its dial timeout, naming the endpoint, without.
func TestTLS(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{TLS: true})
	full := tlsConfig(t, srv.TLS, true)
	db, err := etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, TLS: full, CompactionInterval: -1})
	if err != nil {
		t.Fatalf("Open with a client certificate: %v", err)
	}
	if _, err := db.Create(context.Background(), "/g/r/x", []byte("x")); err != nil {
		t.Errorf("Create over TLS: %v", err)
	}
	db.Close()
	start := time.Now()
	db, err = etcd.Open(etcd.Options{Endpoints: []string{srv.Endpoint}, TLS: tlsConfig(t, srv.TLS, false),
		CompactionInterval: -1, DialTimeout: 2 * time.Second})
	if err == nil {
		db.Close()
		t.Fatal("Open without a client certificate succeeded")
	}
	if !strings.Contains(err.Error(), srv.Endpoint) || time.Since(start) > 5*time.Second {
		t.Errorf("Open without a client certificate: %v after %v", err, time.Since(start))
	}
	t.Logf("Open without a client certificate: %v", err)
}

func tlsConfig(t *testing.T, f *etcdtest.TLSFiles, withCert bool) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool}
	if withCert {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}
