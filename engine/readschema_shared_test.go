package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

const doodadCRDName = "doodads.test.setpoint.dev"

// sharedService opens a Service on db as a replica that shares it; started
// moves its start back, so that the window in which it can have missed a
// CRD's deletion (firstSchemas) is over when started is long enough ago.
func sharedService(t *testing.T, db store.Store, started time.Duration) *Service {
	t.Helper()
	s, err := New(context.Background(), Options{Store: db, SharedStore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.started = s.started.Add(-started)
	return s
}

// deleteDoodadCRD deletes the doodad CRD through s, its objects' cleanup
// done (what the garbage collector does before it removes the finalizer).
func deleteDoodadCRD(t *testing.T, s *Service) {
	t.Helper()
	ctx := context.Background()
	if err := s.Delete(ctx, kinds.CRDResource, "", doodadCRDName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(ctx, kinds.CRDResource, "", doodadCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.SetFinalizers(nil)
	if _, err := s.Update(ctx, kinds.CRDResource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, kinds.CRDResource, "", doodadCRDName, metav1.GetOptions{}); err == nil {
		t.Fatal("the CRD is still stored after its last finalizer went")
	}
}

// lateDoodad stores what a server still on the first doodad schemas writes
// (legacy, which the second schemas prune, and no tier, which they default).
func lateDoodad(t *testing.T, db store.Store, name string) {
	t.Helper()
	raw := `{"apiVersion":"test.setpoint.dev/v1","kind":"Doodad","metadata":{"creationTimestamp":"2026-11-21T12:00:00Z","generation":1,"name":"` +
		name + `","uid":"` + name + `-uid"},"spec":{"legacy":"x","name":"r"}}`
	if _, err := db.Create(context.Background(), store.ObjectKey("test.setpoint.dev", "doodads", "", name), []byte(raw)); err != nil {
		t.Fatal(err)
	}
}

// readThroughNew reports whether s reads the doodad name through the second
// schemas.
func readThroughNew(t *testing.T, s *Service, name string) bool {
	t.Helper()
	u, err := s.Get(context.Background(), doodads, "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := doodadSpec(t, u)
	return spec["tier"] == "gold" && spec["legacy"] == nil
}

// TestCreatedCRDSharedStore: on a shared store, a CRD created for the first
// time has only its own schemas, so its objects are read as stored at once
// and its record is stored at once; a CRD deleted and created again with
// other schemas may meet writes another server makes with the earlier
// incarnation's schemas, which are read through the new ones, on a server
// that saw the deletion and on one that started after it and so cannot
// know of it.
func TestCreatedCRDSharedStore(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	create := func(s *Service, crd testsupport.CRD) {
		t.Helper()
		if _, err := s.Create(ctx, kinds.CRDResource, crd.Unstructured(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := sharedService(t, db, time.Hour)

	create(a, doodadCRD)
	rs := a.reg.ReadOf(doodadCRDName)
	if !rs.Settled() {
		t.Error("a CRD created for the first time waits to settle: its objects are read through its schemas meanwhile")
	}
	if rec := a.loadReadRecord(ctx, doodadCRDName); rec == nil || rec.Fingerprint != rs.Fingerprint() {
		t.Errorf("the record of a CRD created for the first time: %+v, want it stored at once", rec)
	}
	out, err := a.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: first}\nspec: {name: f}\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Stale(revisionOf(out)) {
		t.Error("an object of a CRD created for the first time is not read as stored")
	}

	deleteDoodadCRD(t, a)
	// b starts after the deletion: it cannot know of the earlier
	// incarnation, whose writers may not have settled yet.
	b := sharedService(t, db, 0)
	create(a, doodadCRDv2)
	if _, ok := b.Resource(doodads); !ok {
		t.Fatal("the CRD created again is not served by the other server")
	}
	lateDoodad(t, db, "late")
	if !readThroughNew(t, a, "late") {
		t.Error("a server that saw the CRD deleted reads as stored what another wrote with the deleted incarnation's schemas")
	}
	if !readThroughNew(t, b, "late") {
		t.Error("a server started after the CRD was deleted reads as stored what another wrote with the deleted incarnation's schemas")
	}
	for name, s := range map[string]*Service{"a": a, "b": b} {
		if s.reg.ReadOf(doodadCRDName).Settled() {
			t.Errorf("server %s: the schemas of a CRD created again are settled at once", name)
		}
	}
}

// revisionFails is a store whose CurrentRevision fails while failing is set.
type revisionFails struct {
	store.Store
	failing atomic.Bool
	failed  atomic.Int64
}

func (r *revisionFails) CurrentRevision(ctx context.Context) (int64, error) {
	if r.failing.Load() {
		r.failed.Add(1)
		return 0, errors.New("revision unavailable")
	}
	return r.Store.CurrentRevision(ctx)
}

// TestSchemaChangeSettlesOnTimer: on a shared store a schema change settles
// by itself, readSettle after it: until then every object is read through
// the new schemas, then the revision is raised past what other servers wrote
// meanwhile and stored. While the store cannot say its revision, the change
// stays unsettled and settling is tried again.
func TestSchemaChangeSettlesOnTimer(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rf := &revisionFails{Store: db}
	s := sharedService(t, rf, time.Hour)
	s.readSettle = 10 * time.Millisecond
	if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rf.failing.Store(true)
	replaceCRD(t, s, doodadCRDv2)
	rs := s.reg.ReadOf(doodadCRDName)
	failedAtChange := rf.failed.Load()
	// Another server, still on the first schemas, writes after the change.
	lateDoodad(t, db, "late")
	testsupport.Eventually(t, 10*time.Second, "an attempt to settle the change", func() bool {
		return rf.failed.Load() > failedAtChange
	})
	if rs.Settled() {
		t.Fatal("the change settled while the store could not say its revision")
	}
	if rec := s.loadReadRecord(ctx, doodadCRDName); rec != nil && rec.Fingerprint == rs.Fingerprint() {
		t.Fatalf("the record of unsettled schemas is stored: %+v", rec)
	}
	if !readThroughNew(t, s, "late") {
		t.Error("before the change settled, another server's late write reads as stored")
	}
	late, err := db.Get(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "late"), store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rf.failing.Store(false)
	testsupport.Poll(t, 10*time.Second, "the change to settle and its record to be stored", func() (bool, string) {
		rec := s.loadReadRecord(ctx, doodadCRDName)
		return rs.Settled() && rec != nil && rec.Fingerprint == rs.Fingerprint() && rec.Since == rs.Since(), fmt.Sprintf("settled %v, record %+v", rs.Settled(), rec)
	})
	if rs.Since() <= late.ModRevision {
		t.Errorf("settled at revision %d, not past the late write at %d", rs.Since(), late.ModRevision)
	}
	if !readThroughNew(t, s, "late") {
		t.Error("after the change settled, another server's late write reads as stored")
	}
	after, err := s.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: after}\nspec: {name: c, tier: bronze}\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Stale(revisionOf(after)) {
		t.Error("an object written after the change settled is not read as stored")
	}
}
