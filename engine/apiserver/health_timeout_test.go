package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// hangingStore is a store whose CurrentRevision waits for its caller's
// context once hang is set, as an etcd client does with no member reachable.
type hangingStore struct {
	store.Store
	hang atomic.Bool
}

func (s *hangingStore) CurrentRevision(ctx context.Context) (int64, error) {
	if s.hang.Load() {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return s.Store.CurrentRevision(ctx)
}

// TestHealthAnswersWhileTheStoreHangs: with the store not answering, /livez
// and /readyz answer 500 within the health check's timeout instead of
// waiting for the store client's.
func TestHealthAnswersWhileTheStoreHangs(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &hangingStore{Store: db}
	eng, err := engine.New(context.Background(), engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Options{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with the store answering: %d", path, resp.StatusCode)
		}
	}
	st.hang.Store(true)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/livez", "/readyz"} {
		start := time.Now()
		resp, err := client.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusInternalServerError || took > healthCheckTimeout+time.Second {
			t.Errorf("%s with the store hanging: %d after %s, want 500 within about %s", path, resp.StatusCode, took, healthCheckTimeout)
		}
	}
}
