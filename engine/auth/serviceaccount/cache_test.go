package serviceaccount

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// waitUID polls c until namespace/name has the UID want ("" for none), for
// at most a second: the bound on how late a deletion may reach tokens.
func waitUID(t *testing.T, c *Cache, name, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		uid, ok, err := c.UID(context.Background(), "default", name)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			uid = ""
		}
		if uid == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("UID of %s = %q a second later, want %q", name, uid, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The cache loads the ServiceAccounts there are and follows their changes:
// creation, deletion, re-creation with a new UID.
func TestCacheFollowsServiceAccounts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := engine.New(ctx, engine.Options{Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = svc.Run(ctx) }()
	create := func(name string) string {
		t.Helper()
		u, err := svc.Create(ctx, kinds.ServiceAccountResource, kindstest.FromYAML(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: "+name+", namespace: default}\n"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(u.GetUID())
	}
	before := create("before")

	c := NewCache(svc, quiet)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("the cache did not load")
	}
	waitUID(t, c, "before", before)

	robot := create("robot")
	waitUID(t, c, "robot", robot)
	if err := svc.Delete(ctx, kinds.ServiceAccountResource, "default", "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUID(t, c, "robot", "")
	again := create("robot")
	if again == robot {
		t.Fatal("the re-created ServiceAccount has the old UID")
	}
	waitUID(t, c, "robot", again)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
