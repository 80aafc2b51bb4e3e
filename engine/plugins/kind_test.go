package plugins

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine"
)

// TestEnsureKindRace starts three engines on one empty store at once, as
// three replicas on one etcd prefix do, and has each ensure the Plugin kind:
// the two that lose the race to create the CRD must not return before their
// engine serves it (a list of Plugins right after EnsureKind finds the
// resource).
func TestEnsureKindRace(t *testing.T) {
	const replicas = 3
	for round := range 5 {
		db := openTestDB(t)
		ctx, cancel := context.WithCancel(context.Background())
		var runs sync.WaitGroup
		svcs := make([]*engine.Service, replicas)
		for i := range svcs {
			svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			svcs[i] = svc
			runs.Go(func() { _ = svc.Run(ctx) })
		}
		start := make(chan struct{})
		errs := make([]error, replicas)
		var ensure sync.WaitGroup
		for i, svc := range svcs {
			ensure.Go(func() {
				<-start
				if errs[i] = EnsureKind(ctx, svc); errs[i] != nil {
					return
				}
				_, errs[i] = svc.List(ctx, Resource, "", metav1.ListOptions{})
			})
		}
		close(start)
		ensure.Wait()
		cancel()
		runs.Wait()
		for _, svc := range svcs {
			svc.Close()
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, replica %d: %v", round, i, err)
			}
		}
	}
}
