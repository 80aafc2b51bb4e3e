package engine

import (
	"context"
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
