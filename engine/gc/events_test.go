package gc

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// Events last updated more than EventTTL ago (an hour by default) are
// deleted by the sweep; fresher ones stay.
func TestEventTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := engine.New(ctx, engine.Options{Store: db, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(s, Options{Store: db, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old", "fresh"} {
		ev := kindstest.FromYAML(t, "apiVersion: v1\nkind: Event\nmetadata: {name: "+name+", namespace: default}\ninvolvedObject: {kind: Widget, name: x}\nreason: R\nmessage: m\n")
		if _, err := s.Create(ctx, kinds.EventResource, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if name == "old" {
			now = now.Add(2 * time.Hour)
		}
	}
	if _, err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx, kinds.EventResource, "default", metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "fresh" {
		t.Fatalf("events after the sweep = %v, %v; want only fresh", l, err)
	}
}
