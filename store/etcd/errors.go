package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/setpoint-dev/setpoint/store"
)

// ErrTooLarge: a write is over etcd's request size limit (its
// --max-request-bytes, 1.5 MiB by default).
var ErrTooLarge = fmt.Errorf("store/etcd: document is over etcd's request size limit (etcd's --max-request-bytes, 1.5 MiB by default): %w", store.ErrTooLarge)

// ErrUnavailable wraps the errors of an etcd that cannot be reached or has
// no leader.
var ErrUnavailable = fmt.Errorf("store/etcd: etcd is unavailable: %w", store.ErrUnavailable)

// mapErr turns an etcd client error into the store's: compacted and future
// revisions, too-large requests and a closed client get the store's
// sentinels; op names the operation.
func (db *DB) mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("store/etcd: %s: %w", op, store.ErrCompacted)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("store/etcd: %s: %w", op, store.ErrFutureRevision)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), status.Code(err) == codes.ResourceExhausted:
		return fmt.Errorf("%s: %w (%v)", op, ErrTooLarge, err)
	case deadlineErr(err):
		if db.closed.Load() {
			return store.ErrClosed
		}
		return fmt.Errorf("store/etcd: %s: %w: no answer before the deadline: %w", op, ErrUnavailable, err)
	case errors.Is(err, context.Canceled):
		if db.closed.Load() {
			return store.ErrClosed
		}
		return fmt.Errorf("store/etcd: %s: %w", op, err)
	case errors.Is(err, rpctypes.ErrNoLeader), status.Code(err) == codes.Unavailable,
		// etcd gave up on the request itself (no quorum to commit it in
		// time): the same as no answer before the deadline.
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrTimeoutWaitAppliedIndex):
		return fmt.Errorf("store/etcd: %s: %w: %v", op, ErrUnavailable, err)
	}
	return fmt.Errorf("store/etcd: %s: %w", op, err)
}

// deadlineErr reports whether err is a deadline that passed: the client's
// own, or the server's answer to the deadline the client sent it, which
// etcd returns as status Unknown with the context's message (or as
// DeadlineExceeded).
func deadlineErr(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && (st.Code() == codes.DeadlineExceeded ||
		st.Code() == codes.Unknown && st.Message() == context.DeadlineExceeded.Error())
}
