package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// stalledRecords is a store whose reads of read-schema records block until
// their context ends, as a call to an etcd the server is cut off from does;
// entered gets a value when one starts.
type stalledRecords struct {
	store.Store
	entered chan struct{}
}

func (s *stalledRecords) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	if !strings.HasPrefix(key, readRecordPrefix) {
		return s.Store.Get(ctx, key, opts)
	}
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// stalledReplicas returns two Services sharing one Badger store: a reads it
// directly, b through st, whose reads of read-schema records stall.
func stalledReplicas(t *testing.T) (a, b *Service, st *stalledRecords) {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a = sharedService(t, db, time.Hour)
	st = &stalledRecords{Store: db, entered: make(chan struct{}, 1)}
	b = sharedService(t, st, time.Hour)
	return a, b, st
}

// TestRunReturnsWhileStoreStalls: a replica whose CRD follower serves a CRD
// another replica created, while its store calls stall, still returns from
// Run when its context ends, so that a server cut off from its store stops.
func TestRunReturnsWhileStoreStalls(t *testing.T) {
	a, b, st := stalledReplicas(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	if _, err := a.Create(context.Background(), kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower of the other replica did not read the new CRD's read-schema record")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context's end: it waits on a store call that ignores it")
	}
}

// TestReadRecordSaveWaitsWithinItsContext: a save of a read-schema record
// waiting behind another that stalls on the store gives up when its own
// context ends, rather than wait as long as the store does.
func TestReadRecordSaveWaitsWithinItsContext(t *testing.T) {
	a, b, st := stalledReplicas(t) // b before the CRD: New reads no record
	if _, err := a.Create(context.Background(), kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := a.reg.ReadOf(doodadCRDName)
	if rs == nil {
		t.Fatal("no read schemas for the new CRD")
	}

	stalledCtx, release := context.WithCancel(context.Background())
	defer release()
	first := make(chan struct{})
	go func() { defer close(first); b.saveReadRecord(stalledCtx, doodadCRDName, rs) }()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first save did not reach the store")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	second := make(chan struct{})
	go func() { defer close(second); b.saveReadRecord(ctx, doodadCRDName, rs) }()
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("a save waiting behind a stalled one outlived its context by 5s")
	}
	release()
	<-first
}

// TestReadThroughCRDWithinItsTimeout: a request that serves a CRD another
// replica created (readThroughCRD) while the store stalls on its
// read-schema record gives up within crdReadTimeout, rather than wait as
// long as the store does.
func TestReadThroughCRDWithinItsTimeout(t *testing.T) {
	a, b, st := stalledReplicas(t)
	if _, err := a.Create(context.Background(), kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := withinCRDReadTimeout(t, st, "the read through the new CRD", func() error {
		_, err := b.Get(context.Background(), doodads, "", "missing", metav1.GetOptions{})
		return err
	})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing doodad: %v, want NotFound", err)
	}
}

// TestCRDWriteWithinItsTimeout: a CRD create whose commit hook serves the
// CRD while the store stalls on its read-schema record answers within
// crdReadTimeout, rather than wait as long as the store does.
func TestCRDWriteWithinItsTimeout(t *testing.T) {
	_, b, st := stalledReplicas(t)
	err := withinCRDReadTimeout(t, st, "the CRD's create", func() error {
		_, err := b.Create(context.Background(), kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("create the CRD: %v", err)
	}
}

// withinCRDReadTimeout runs call, named what, on a goroutine of its own: it
// must read a read-schema record from st, which stalls, and then return
// within crdReadTimeout (and some slack), whose result it returns.
func withinCRDReadTimeout(t *testing.T, st *stalledRecords, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not read its read-schema record", what)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(crdReadTimeout + 5*time.Second):
		t.Fatalf("%s still waits %v later on a stalled store", what, crdReadTimeout+5*time.Second)
		return nil
	}
}
