package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// doodadCRDOf is the Doodad CRD with the given spec properties (a YAML flow
// mapping's contents) at v1beta1 and at v1, the storage version.
func doodadCRDOf(v1beta1, v1 string) testsupport.CRD {
	schema := func(props string) string {
		return `{type: object, properties: {spec: {type: object, properties: {` + props + `}}}}`
	}
	return testsupport.CRD{Group: "test.setpoint.dev", Kind: "Doodad", Scope: "Cluster", Versions: []testsupport.Version{
		{Name: "v1beta1", Schema: schema(v1beta1)},
		{Name: "v1", Storage: true, Schema: schema(v1)},
	}}
}

// doodadCRD is a kind whose schema the tests below change: at first spec has
// name and legacy, then (doodadCRDv2) legacy is gone from v1 and tier has a
// default, another at v1beta1.
var (
	doodadCRD   = doodadCRDOf("name: {type: string}, legacy: {type: string}", "name: {type: string}, legacy: {type: string}")
	doodadCRDv2 = doodadCRDOf("name: {type: string}, legacy: {type: string}, tier: {type: string, default: silver}",
		"name: {type: string}, tier: {type: string, default: gold}")
)

var (
	doodads        = schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1", Resource: "doodads"}
	doodadsV1beta1 = schema.GroupVersionResource{Group: "test.setpoint.dev", Version: "v1beta1", Resource: "doodads"}
)

// replaceCRD updates the doodad CRD's spec to that of crd.
func replaceCRD(t *testing.T, s *Service, crd testsupport.CRD) {
	t.Helper()
	ctx := context.Background()
	cur, err := s.Get(ctx, kinds.CRDResource, "", "doodads.test.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["spec"] = crd.Object()["spec"]
	if _, err := s.Update(ctx, kinds.CRDResource, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update CRD: %v", err)
	}
}

func doodadSpec(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

func TestSchemaChangeAppliesOnRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openService(t, dir)
	s.readSettle = 50 * time.Millisecond
	if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := s.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: old}\nspec: {name: a, legacy: x}\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, doodadsV1beta1, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1beta1\nkind: Doodad\nmetadata: {name: beta}\nspec: {name: b}\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storedBefore, err := db.Get(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "old"), store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	storedBeta, err := db.Get(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "beta"), store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(storedBeta.Value), `{"apiVersion":"test.setpoint.dev/v1",`) {
		t.Errorf("an object written through v1beta1 is stored as %s, want at the storage version v1", storedBeta.Value)
	}

	if _, err := s.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: gone}\nspec: {name: g, legacy: q}\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replaceCRD(t, s, doodadCRDv2)
	newer, err := s.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: newer}\nspec: {name: c, tier: bronze}\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Written through v1beta1, which has legacy and defaults tier to
	// silver: stored at v1, whose schema prunes legacy.
	if _, err := s.Create(ctx, doodadsV1beta1, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1beta1\nkind: Doodad\nmetadata: {name: delta}\nspec: {name: d, legacy: z}\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// want is what each object reads as now: the schema of the version it
	// is stored at prunes legacy and defaults tier. Objects are stored at
	// the storage version, v1, also the one written through v1beta1.
	want := map[string]map[string]any{
		"old":   {"name": "a", "tier": "gold"},
		"beta":  {"name": "b", "tier": "gold"},
		"newer": {"name": "c", "tier": "bronze"},
		"delta": {"name": "d", "tier": "silver"},
		"gone":  {"name": "g", "tier": "gold"},
	}
	check := func(how string, u *unstructured.Unstructured) {
		t.Helper()
		w, ok := want[u.GetName()]
		if !ok {
			t.Errorf("%s: unexpected object %s", how, u.GetName())
			return
		}
		got := doodadSpec(t, u)
		if len(got) != len(w) || got["name"] != w["name"] || got["tier"] != w["tier"] {
			t.Errorf("%s %s: spec %v, want %v", how, u.GetName(), got, w)
		}
	}
	readAll := func(s *Service) {
		t.Helper()
		for name := range want {
			for _, gvr := range []schema.GroupVersionResource{doodads, doodadsV1beta1} {
				u, err := s.Get(ctx, gvr, "", name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				check("get at "+gvr.Version, u)
			}
		}
		l, err := s.List(ctx, doodads, "", metav1.ListOptions{})
		if err != nil || len(l.Items) != len(want) {
			t.Fatalf("list: %v items, %v", len(l.Items), err)
		}
		for i := range l.Items {
			check("list", &l.Items[i])
		}
		jl, err := s.ListJSON(ctx, doodads, "", metav1.ListOptions{})
		if err != nil || len(jl.Items) != len(want) {
			t.Fatalf("list as JSON: %v items, %v", len(jl.Items), err)
		}
		for _, b := range jl.Items {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			check("list as JSON", &unstructured.Unstructured{Object: m})
		}
	}
	readAll(s)

	// A watch that replays from before the change sees the same objects.
	w, err := s.Watch(ctx, doodads, "", metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < len(want); seen++ {
		ev := nextEvent(t, w)
		if ev.Type != watch.Added {
			t.Fatalf("replayed event %s, want ADDED", ev.Type)
		}
		check("watch", ev.Object.(*unstructured.Unstructured))
	}
	w.Stop()

	// A delete of an object written before the change is sent with the
	// object as it reads.
	dw, err := s.Watch(ctx, doodads, "", metav1.ListOptions{ResourceVersion: newer.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, doodads, "", "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextEvent(t, dw)
		if u := ev.Object.(*unstructured.Unstructured); ev.Type == watch.Deleted && u.GetName() == "gone" {
			check("delete event", u)
			break
		}
	}
	dw.Stop()
	delete(want, "gone")

	// What the read applies is not written back.
	storedAfter, err := db.Get(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "old"), store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(storedAfter.Value) != string(storedBefore.Value) || storedAfter.ModRevision != storedBefore.ModRevision {
		t.Errorf("the stored object changed on read:\n%s\n%s", storedBefore.Value, storedAfter.Value)
	}
	// An update of the old object starts from what it reads as.
	cur, err := s.Get(ctx, doodads, "", "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.GetResourceVersion() != old.GetResourceVersion() {
		t.Errorf("resourceVersion %s after the schema change, want %s", cur.GetResourceVersion(), old.GetResourceVersion())
	}
	cur.SetLabels(map[string]string{"touched": "yes"})
	upd, err := s.Update(ctx, doodads, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("update", upd)

	// A CRD write that leaves the schemas alone keeps the revision objects
	// are read as stored from; one that changes them moves it.
	sv, _ := s.reg.Get(doodads)
	since := sv.ReadSchemas().Since()
	crd, err := s.Get(ctx, kinds.CRDResource, "", "doodads.test.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.SetLabels(map[string]string{"team": "doodad"})
	if _, err := s.Update(ctx, kinds.CRDResource, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if sv, _ := s.reg.Get(doodads); sv.ReadSchemas().Since() != since {
		t.Errorf("a label on the CRD moved the read revision from %d to %d", since, sv.ReadSchemas().Since())
	}
	if sv, _ := s.reg.Get(doodads); sv.ReadSchemas().Stale(revisionOf(newer)) {
		t.Error("an object written after the schema change is read through the schema")
	}

	// A restart reads the same, and reads as stored since the same
	// revision (the stored record), not since the CRD's last write.
	sinceBefore := since
	// The revision is stored once writes that took the old schemas are
	// done (readSettle, shortened by this test).
	testsupport.Poll(t, 10*time.Second, "the read-schema record to be stored", func() (bool, string) {
		rec := s.loadReadRecord(ctx, "doodads.test.setpoint.dev")
		sv, _ := s.reg.Get(doodads)
		return rec != nil && rec.Fingerprint == sv.ReadSchemas().Fingerprint() && rec.Since == sinceBefore, fmt.Sprintf("record %+v", rec)
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, db = openService(t, dir)
	readAll(s)
	if sv, _ := s.reg.Get(doodads); sv.ReadSchemas().Since() != sinceBefore {
		t.Errorf("after a restart objects are read as stored since %d, want %d as before", sv.ReadSchemas().Since(), sinceBefore)
	}
}

// TestSchemaChangeRacingWrites checks that objects created while the CRD's
// schema changes all read through the new schema, also those whose create
// took the old one and committed after the change.
func TestSchemaChangeRacingWrites(t *testing.T) {
	ctx := context.Background()
	s, _ := openService(t, t.TempDir())
	if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := kindstest.FromYAML(t, fmt.Sprintf("apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: r%d-%d}\nspec: {name: r, legacy: x}\n", g, i))
				if _, err := s.Create(ctx, doodads, o, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	replaceCRD(t, s, doodadCRDv2)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	l, err := s.List(ctx, doodads, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range l.Items {
		if spec := doodadSpec(t, &l.Items[i]); spec["tier"] != "gold" || spec["legacy"] != nil {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d objects created around the schema change read without it", bad, len(l.Items))
	}
}

// TestReadRecordKey checks that the records of read schemas live among the
// server's private keys, which no resource key can begin with.
func TestReadRecordKey(t *testing.T) {
	if k := readRecordKey("x"); !store.IsPrivate(k) {
		t.Errorf("record key %q is not private", k)
	}
}

// TestSchemaChangeCrashBeforeSettled checks that a server restarted before a
// schema change settled reads objects written around the change through the
// new schemas, also one committed with the old schemas after the change
// whose raise of the revision was never stored (a crash just after its
// commit), and that a watch opened before the change ends with it.
func TestSchemaChangeCrashBeforeSettled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openService(t, dir)
	if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, doodads, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	replaceCRD(t, s, doodadCRDv2)
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("an event instead of the end of the watch")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watch opened before the schema change goes on")
	}
	// What a create that took the old schemas writes, committed after the
	// change, with nothing noted afterwards.
	raw := `{"apiVersion":"test.setpoint.dev/v1","kind":"Doodad","metadata":{"creationTimestamp":"2026-11-21T12:00:00Z","generation":1,"name":"late","uid":"late-uid"},"spec":{"legacy":"x","name":"r"}}`
	if _, err := db.Create(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "late"), []byte(raw)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, db = openService(t, dir)
	u, err := s.Get(ctx, doodads, "", "late", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if spec := doodadSpec(t, u); spec["tier"] != "gold" || spec["legacy"] != nil {
		t.Errorf("after a restart before the change settled: spec %v, want it read through the new schema", spec)
	}
}

// TestSchemaChangeSharedStore checks that a server sharing its store with
// others reads through a CRD's new schemas the objects another server wrote
// with the old ones after the change (it learns of the change a moment
// later), until the change settles and afterwards, also after a restart;
// and that objects written after it settled are read as stored. A server
// alone on its store reads such an object as stored: only its own writes can
// race a change there.
func TestSchemaChangeSharedStore(t *testing.T) {
	ctx := context.Background()
	raw := func(name string) []byte {
		return []byte(`{"apiVersion":"test.setpoint.dev/v1","kind":"Doodad","metadata":{"creationTimestamp":"2026-11-21T12:00:00Z","generation":1,"name":"` +
			name + `","uid":"` + name + `-uid"},"spec":{"legacy":"x","name":"r"}}`)
	}
	throughNew := func(s *Service, name string) bool {
		t.Helper()
		u, err := s.Get(ctx, doodads, "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := doodadSpec(t, u)
		return spec["tier"] == "gold" && spec["legacy"] == nil
	}
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			dir := t.TempDir()
			db, err := badger.Open(dir, badger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s, err := New(ctx, Options{Store: db, SharedStore: shared})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.readSettle = time.Hour
			if _, err := s.Create(ctx, kinds.CRDResource, doodadCRD.Unstructured(), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			replaceCRD(t, s, doodadCRDv2)
			// Another server, still on the old schemas, writes after the change.
			if _, err := db.Create(ctx, store.ObjectKey("test.setpoint.dev", "doodads", "", "other"), raw("other")); err != nil {
				t.Fatal(err)
			}
			if got := throughNew(s, "other"); got != shared {
				t.Fatalf("an object another server wrote with the old schemas after the change: read through the new ones %v, want %v", got, shared)
			}
			if !shared {
				return
			}
			rs := s.reg.ReadOf("doodads.test.setpoint.dev")
			cur, err := db.CurrentRevision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rs.Settle(cur)
			s.saveReadRecord(ctx, "doodads.test.setpoint.dev", rs)
			if !throughNew(s, "other") {
				t.Error("after the change settled, the other server's late write reads as stored")
			}
			after, err := s.Create(ctx, doodads, kindstest.FromYAML(t, "apiVersion: test.setpoint.dev/v1\nkind: Doodad\nmetadata: {name: after}\nspec: {name: c, tier: bronze}\n"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sv, _ := s.reg.Get(doodads); sv.ReadSchemas().Stale(revisionOf(after)) {
				t.Error("an object written after the change settled is not read as stored")
			}
			s.Close()
			s2, err := New(ctx, Options{Store: db, SharedStore: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if !throughNew(s2, "other") {
				t.Error("after a restart, the other server's late write reads as stored")
			}
		})
	}
}
