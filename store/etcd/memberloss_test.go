package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
)

// TestMemberLoss kills one member of a 3-member etcd (the leader, then in
// another cluster a follower) while a loop of creates runs through a store
// that knows all three endpoints. Creates in flight at the kill may fail
// with ErrUnavailable; once the cluster settles every create succeeds, and
// a watch (resumed from its last revision when etcd ends it) delivers every
// stored document exactly once, in revision order.
func TestMemberLoss(t *testing.T) {
	for _, victim := range []string{"leader", "follower"} {
		t.Run(victim, func(t *testing.T) {
			t.Parallel()
			memberLoss(t, victim == "leader")
		})
	}
}

// memberLossSettle is how long after the kill creates may still fail.
const memberLossSettle = 3 * time.Second

func memberLoss(t *testing.T, killLeader bool) {
	c := etcdtest.StartCluster(t, 3, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{
		Endpoints:          c.Endpoints,
		Prefix:             "/loss",
		RequestTimeout:     2 * time.Second,
		CompactionInterval: -1,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	leader := c.Leader(t)
	victim := c.Members[leader]
	if !killLeader {
		victim = c.Members[(leader+1)%len(c.Members)]
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex // guards seen and lastSeen
	seen := make(map[string]int64)
	var lastSeen int64
	var resumes int
	var watchErr error
	watched := make(chan struct{})
	start, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(watched)
		last := start
		for ctx.Err() == nil {
			w, err := db.Watch(ctx, "/w/", last)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.Events() {
				if ev.Revision() <= last {
					watchErr = fmt.Errorf("event at %d after %d", ev.Revision(), last)
					return
				}
				last = ev.Revision()
				if ev.Type != store.Added {
					watchErr = fmt.Errorf("event %v on %s", ev.Type, ev.Object.Key)
					return
				}
				if r, dup := seen[ev.Object.Key]; dup {
					watchErr = fmt.Errorf("%s delivered twice (%d, %d)", ev.Object.Key, r, last)
					return
				}
				mu.Lock()
				seen[ev.Object.Key] = last
				lastSeen = last
				mu.Unlock()
			}
			if w.Err() != nil {
				resumes++
			}
		}
	}()

	type failure struct {
		key string
		at  time.Duration // from the kill to the create's start
		err error
	}
	var (
		created  = make(map[string]int64)
		failures []failure
		killedAt time.Time
		after    int           // creates that succeeded after the settle time
		slowest  time.Duration // the longest create sent after the kill
	)
	begin := time.Now()
	for i := 0; ; i++ {
		if killedAt.IsZero() && time.Since(begin) > time.Second {
			victim.Stop()
			killedAt = time.Now()
		}
		now := time.Now()
		if !killedAt.IsZero() && now.Sub(killedAt) > memberLossSettle+2*time.Second {
			break
		}
		key := fmt.Sprintf("/w/%06d", i)
		rev, err := db.Create(ctx, key, []byte(`{}`))
		if !killedAt.IsZero() {
			slowest = max(slowest, time.Since(now))
		}
		if err != nil {
			var at time.Duration
			if !killedAt.IsZero() {
				at = now.Sub(killedAt)
			}
			failures = append(failures, failure{key, at, err})
			t.Logf("create %s sent %v after the kill failed after %v: %v", key, at, time.Since(now), err)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("create %s: %v, want ErrUnavailable", key, err)
			}
			continue
		}
		created[key] = rev
		if !killedAt.IsZero() && time.Since(killedAt) > memberLossSettle {
			after++
		}
	}
	var first, last time.Duration
	for i, f := range failures {
		if i == 0 {
			first = f.at
		}
		last = f.at
		if f.at > memberLossSettle {
			t.Errorf("create %s failed %v after the kill: %v", f.key, f.at, f.err)
		}
	}
	t.Logf("killed the %s: %d creates, %d failed, the first sent %v and the last %v after the kill; the slowest create after the kill took %v; %d watch resumes",
		map[bool]string{true: "leader", false: "follower"}[killLeader],
		len(created)+len(failures), len(failures), first, last, slowest, resumes)
	if after < 10 {
		t.Errorf("only %d creates succeeded in the 2 s after the settle time", after)
	}

	// A failed create may have been applied (its answer was lost): what
	// etcd holds is the truth the watch must match.
	list, err := db.List(ctx, "/w/", store.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	stored := make(map[string]int64, len(list.Items))
	for _, kv := range list.Items {
		stored[kv.Key] = kv.ModRevision
	}
	for k, rev := range created {
		if stored[k] != rev {
			t.Errorf("%s: created at %d, stored at %d", k, rev, stored[k])
		}
	}
	// Wait for the watch to reach the list's revision.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := lastSeen >= list.Revision
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-watched
	if watchErr != nil {
		t.Fatalf("watch: %v", watchErr)
	}
	for k, rev := range stored {
		if seen[k] != rev {
			t.Errorf("%s stored at %d, watched at %d", k, rev, seen[k])
		}
	}
	for k := range seen {
		if _, ok := stored[k]; !ok {
			t.Errorf("%s watched but not stored", k)
		}
	}
}

// TestQuorumLoss stops two members of a 3-member etcd: a create, a get and
// a list with a deadline fail with ErrUnavailable before that deadline (a
// margin before it, so that the caller can still answer with the error);
// once the members are back, writes succeed again.
func TestQuorumLoss(t *testing.T) {
	c := etcdtest.StartCluster(t, 3, etcdtest.Options{})
	db, err := etcd.Open(etcd.Options{Endpoints: c.Endpoints, Prefix: "/quorum", CompactionInterval: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Create(context.Background(), "/q/before", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	c.Members[1].Stop()
	c.Members[2].Stop()
	const timeout = 2 * time.Second
	ops := map[string]func(ctx context.Context) error{
		"create": func(ctx context.Context) error { _, err := db.Create(ctx, "/q/none", []byte(`{}`)); return err },
		"get": func(ctx context.Context) error {
			_, err := db.Get(ctx, "/q/before", store.GetOptions{})
			return err
		},
		"list": func(ctx context.Context) error { _, err := db.List(ctx, "/q/", store.ListOptions{}); return err },
	}
	for name, op := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		err := op(ctx)
		took := time.Since(start)
		cancel()
		t.Logf("%s without quorum: %v after %v", name, err, took)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s without quorum: %v, want ErrUnavailable", name, err)
		}
		if took >= timeout {
			t.Errorf("%s without quorum answered after %v, not before its %v deadline", name, took, timeout)
		}
	}
	for _, m := range c.Members[1:] {
		if err := m.Restart(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.Create(ctx, "/q/after", []byte(`{}`)); err != nil {
		t.Errorf("create once quorum is back: %v", err)
	}
}
