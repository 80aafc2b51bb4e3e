package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// insufficientStorage is the engine's answer to a write on a nearly full
// disk.
var insufficientStorage = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: 507, Reason: "InsufficientStorage",
	Message: "the server's disk is nearly full",
}}

// TestRetryWhileRefused: the defaults' writes are retried while the store
// refuses writes for now (as the engine answers it, wrapped), and a
// failure of another kind ends the retries with that failure.
func TestRetryWhileRefused(t *testing.T) {
	gr := schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
	noSpace := fmt.Errorf("rbac: ensure clusterrole admin: %w", insufficientStorage)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	calls := 0
	err := retryWhileRefused(ctx, time.Millisecond, func(context.Context) error {
		calls++
		if calls < 3 {
			return noSpace
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("refused twice, then written: err %v after %d calls; want nil after 3", err, calls)
	}

	forbidden := apierrors.NewForbidden(gr, "admin", errors.New("no"))
	calls = 0
	err = retryWhileRefused(ctx, time.Millisecond, func(context.Context) error {
		calls++
		if calls < 2 {
			return noSpace
		}
		return forbidden
	})
	if !apierrors.IsForbidden(err) || calls != 2 {
		t.Fatalf("refused, then forbidden: err %v after %d calls; want the 403 after 2", err, calls)
	}

	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := retryWhileRefused(short, time.Millisecond, func(context.Context) error { return noSpace }); err == nil {
		t.Fatal("refused until the context ended: nil error")
	}
}

func TestStoreRefusesForNow(t *testing.T) {
	gr := schema.GroupResource{Resource: "namespaces"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{store.ErrNoSpace, true},
		{fmt.Errorf("wrapped: %w", store.ErrUnavailable), true},
		{insufficientStorage, true},
		{apierrors.NewServiceUnavailable("store unavailable"), true},
		{apierrors.NewTimeoutError("write past its deadline", 0), true},
		{apierrors.NewConflict(gr, "x", errors.New("modified")), false},
		{apierrors.NewInternalError(errors.New("damaged")), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ClusterRole"}, "x", nil), false},
		{errors.New("plain"), false},
	} {
		if got := storeRefusesForNow(c.err); got != c.want {
			t.Errorf("storeRefusesForNow(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}
