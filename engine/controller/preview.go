package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Preview is what one reconcile of an object would write, computed with the
// controller's own rules but without a server: `setpoint plugin test` prints
// it so that a plugin's author sees what would be stored.
type Preview struct {
	// Status is the status the object would get (the plugin's, with
	// observedGeneration and the Ready condition).
	Status map[string]any
	// Writes are the child writes, in order.
	Writes []PreviewWrite
	// Failure is the Ready condition's message when it is not True.
	Failure string
}

// PreviewWrite is one child write.
type PreviewWrite struct {
	// Op is create, update or delete.
	Op     string
	Object *unstructured.Unstructured
}

// PreviewReconcile computes what the controller would write for parent
// (namespaced or not) after the plugin answered resp (or failed with
// callErr), given the observed children. owns lists the kinds the controller
// owns; now stamps the conditions.
func PreviewReconcile(parent *unstructured.Unstructured, namespaced bool, owns []Kind, observed []*unstructured.Unstructured,
	resp *abi.ReconcileResponse, callErr error, now time.Time) *Preview {
	ready := readyCondition{status: metav1.ConditionTrue, reason: ReasonReconciled, message: "reconciled"}
	out := &Preview{}
	var fromPlugin map[string]any
	switch {
	case callErr != nil:
		ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonPluginError, message: callErr.Error()}
	case resp.Error != "":
		reason := ReasonReconcileFailed
		if resp.Terminal {
			reason = ReasonTerminalError
		}
		ready = readyCondition{status: metav1.ConditionFalse, reason: reason, message: resp.Error}
	default:
		byGK := make(map[schema.GroupKind]Kind, len(owns))
		for _, k := range owns {
			byGK[k.GroupVersionKind().GroupKind()] = k
		}
		desired := make([]*unstructured.Unstructured, len(resp.Children))
		var err error
		for i, raw := range resp.Children {
			if desired[i], err = decodeChild(raw); err != nil {
				err = fmt.Errorf("child %d: %w: %v", i, ErrInvalidChild, err)
				break
			}
		}
		var actions []action
		if err == nil {
			actions, err = planChildren(parent, namespaced, byGK, observed, desired)
		}
		if err != nil {
			ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonTerminalError, message: err.Error()}
		}
		for _, a := range actions {
			out.Writes = append(out.Writes, PreviewWrite{Op: a.op.String(), Object: a.obj})
		}
	}
	if resp != nil && len(resp.Status) > 0 && string(resp.Status) != "null" {
		if m, ok := decodeStatus(resp.Status); ok {
			fromPlugin = m
		} else if ready.status == metav1.ConditionTrue {
			ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonTerminalError, message: "plugin: status is not a JSON object"}
		}
	}
	observedStatus, _ := parent.Object["status"].(map[string]any)
	out.Status = desiredStatus(observedStatus, fromPlugin, parent.GetGeneration(), ready, now)
	if ready.status != metav1.ConditionTrue {
		out.Failure = ready.reason + ": " + ready.message
	}
	return out
}

func decodeStatus(raw []byte) (map[string]any, bool) {
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}
