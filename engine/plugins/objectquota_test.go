package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestObjectQuotaCountsAndRecounts(t *testing.T) {
	stored, counts := 0, 0
	q := newObjectQuota(3, func(context.Context, string) (int, error) { counts++; return stored, nil })
	now := time.Unix(0, 0)
	q.now = func() time.Time { return now }
	gr := schema.GroupResource{Group: "example.setpoint.dev", Resource: "notes"}
	create := func() error {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		err := q.admit(context.Background(), "p", sourceHostCall, gr, u)
		if err == nil {
			stored++
			if u.GetLabels()[CreatedByLabel] != "p" {
				t.Errorf("labels %v, want %s=p", u.GetLabels(), CreatedByLabel)
			}
		}
		return err
	}
	for i := range 3 {
		if err := create(); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	err := create()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "object quota of 3") {
		t.Fatalf("create past the quota: %v, want Forbidden naming the quota", err)
	}
	stored = 1 // two deleted
	if err := create(); err == nil {
		t.Fatal("a create before the recount was let through")
	}
	now = now.Add(DefaultQuotaRecount)
	if err := create(); err != nil {
		t.Fatalf("create after the recount: %v", err)
	}
	if counts != 2 {
		t.Errorf("%d counts in the store, want 2 (at the start and at the quota)", counts)
	}
}
