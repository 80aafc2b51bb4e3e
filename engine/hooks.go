package engine

import (
	"context"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// kindHooks lets a built-in kind take part in writes, with the Service.
type kindHooks interface {
	// prepare fills server-set fields of obj before validation; old is nil
	// on create; sub is the subresource an update is written through.
	prepare(ctx context.Context, s *Service, sub string, obj, old map[string]any) error
	// committed runs after a successful, non-dry-run write; obj is nil after a delete.
	committed(ctx context.Context, s *Service, obj, old map[string]any)
	// deleting runs before the object is removed from the store and may
	// refuse; with dryRun it only checks.
	deleting(ctx context.Context, s *Service, obj map[string]any, dryRun bool) error
}

// hooksOf returns the hooks of sv's kind, nil for kinds without.
func hooksOf(sv *kinds.Kind) kindHooks {
	if !sv.Builtin {
		return nil
	}
	switch sv.GVR {
	case kinds.NamespaceResource:
		return namespaceHooks{}
	case kinds.CRDResource:
		return crdHooks{}
	}
	return nil
}
