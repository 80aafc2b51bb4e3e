package election_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/election"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// leaseAudit keeps the user, verb and resource of each write it is given.
type leaseAudit struct {
	mu   sync.Mutex
	seen []string
}

func (a *leaseAudit) AuditWrite(_ context.Context, attrs authorizer.Attributes, _ runtime.Object) func(runtime.Object, error) {
	a.mu.Lock()
	a.seen = append(a.seen, attrs.GetUser().GetName()+" "+attrs.GetVerb()+" "+attrs.GetAPIGroup()+"/"+attrs.GetResource())
	a.mu.Unlock()
	return func(runtime.Object, error) {}
}

// TestLeaseWritesAudited checks that an elector's Lease writes reach the
// engine's Auditor as system:setpoint:leader-election: the server makes
// them itself, as kube-controller-manager writes its Leases under its own
// identity.
func TestLeaseWritesAudited(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a := &leaseAudit{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := engine.New(ctx, engine.Options{Store: db, Logger: quietLogger(), Auditor: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if err := election.EnsureKind(ctx, svc); err != nil {
		t.Fatal(err)
	}
	l, err := election.New(short(election.Options{Client: svc, Identity: "replica-0", Logger: quietLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	led := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, quietLogger(), l.Elector("audited"), func(ctx context.Context) error {
			close(led)
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("the elector did not lead within 10s")
	}
	cancel()
	<-done
	l.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	want := "system:setpoint:leader-election create coordination.k8s.io/leases"
	found := false
	for _, s := range a.seen {
		if s == want {
			found = true
		}
		if !strings.HasPrefix(s, "system:setpoint:") {
			t.Errorf("a write audited as %q", s)
		}
	}
	if !found {
		t.Errorf("audited writes %q lack %q", a.seen, want)
	}
}
