package engine

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// SetCRDCondition sets the condition of cond's type, status, reason and
// message in the status of the stored CustomResourceDefinition name, when
// it is still the object uid, retrying conflicts. The condition's
// lastTransitionTime moves only when its status changes (the Service's
// clock gives the new one). A CRD that is gone or replaced is left alone.
func (s *Service) SetCRDCondition(ctx context.Context, name string, uid types.UID, cond apiextensionsv1.CustomResourceDefinitionCondition, opts metav1.UpdateOptions) error {
	for attempt := 1; ; attempt++ {
		cur, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.GetUID() != uid {
			return nil
		}
		if err := setCRDCondition(cur.Object, cond.Type, cond.Status, cond.Reason, cond.Message, s.opts.Now()); err != nil {
			return apierrors.NewInternalError(err)
		}
		_, err = s.UpdateStatus(ctx, kinds.CRDResource, cur, opts)
		if apierrors.IsConflict(err) && attempt < maxPatchAttempts {
			continue
		}
		return err
	}
}

// setCRDCondition sets a condition in a CRD's status.conditions, keeping its
// lastTransitionTime when its status does not change.
func setCRDCondition(obj map[string]any, typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, reason, message string, now time.Time) error {
	conds, _, err := unstructured.NestedSlice(obj, "status", "conditions")
	if err != nil {
		return fmt.Errorf("status.conditions: %w", err)
	}
	c := map[string]any{
		"type": string(typ), "status": string(status), "reason": reason, "message": message,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	for i, x := range conds {
		m, ok := x.(map[string]any)
		if !ok || m["type"] != string(typ) {
			continue
		}
		if lt, ok := m["lastTransitionTime"]; ok && m["status"] == string(status) {
			c["lastTransitionTime"] = lt
		}
		conds[i] = c
		return unstructured.SetNestedSlice(obj, conds, "status", "conditions")
	}
	return unstructured.SetNestedSlice(obj, append(conds, c), "status", "conditions")
}
