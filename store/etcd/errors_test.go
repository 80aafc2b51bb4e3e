package etcd

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/setpoint-dev/setpoint/store"
)

// etcd's own timeouts mean it could not commit in time, as when quorum is
// lost: callers see the store as unavailable, as when no answer came.
func TestEtcdTimeoutsAreUnavailable(t *testing.T) {
	db := &DB{}
	for _, err := range []error{
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex,
		rpctypes.ErrNoLeader,
	} {
		if got := db.mapErr("create", err); !errors.Is(got, store.ErrUnavailable) {
			t.Errorf("mapErr(%v) = %v, want store.ErrUnavailable", err, got)
		}
	}
	if got := db.mapErr("create", rpctypes.ErrCompacted); errors.Is(got, store.ErrUnavailable) {
		t.Errorf("mapErr(compacted) = %v, want not unavailable", got)
	}
}
