package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConditionReady is the condition the engine keeps on every reconciled
// object.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonReconciled: the plugin succeeded and the children are applied.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileFailed: the plugin reported an error; it is retried
	// with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonTerminalError: the plugin reported an error not worth retrying;
	// it is not retried until the object's generation changes.
	ReasonTerminalError = "TerminalError"
	// ReasonPluginError: calling the plugin failed (trap, timeout, bad
	// output); it is retried with backoff.
	ReasonPluginError = "PluginError"
	// ReasonApplyFailed: writing the children failed; retried with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonFinalizeFailed: the finalizer reported or met an error.
	ReasonFinalizeFailed = "FinalizeFailed"
	// ReasonFinalizeTerminal: the finalizer reported an error not worth
	// retrying; the object stays until its generation changes or someone
	// removes the finalizer.
	ReasonFinalizeTerminal = "FinalizeTerminalError"
	// ReasonFinalizing: the object is being deleted and the finalizer is not
	// done yet.
	ReasonFinalizing = "Finalizing"
)

// readyCondition is the Ready condition the engine wants on an object.
type readyCondition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	// detail follows message in the condition (the retry count); a change
	// of detail alone updates the condition but records no event.
	detail string
}

// text is the condition's message.
func (r readyCondition) text() string { return truncate(r.message + r.detail) }

// retrying notes in the condition that the controller backs off and
// retries, and how many attempts failed so far.
func (r *readyCondition) retrying(attempt int) {
	r.detail = fmt.Sprintf(" (attempt %d, retrying with backoff)", attempt+1)
}

// maxMessage bounds a condition or event message, so that a plugin cannot
// grow an object without bound through its errors.
const maxMessage = 1024

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

// desiredStatus returns the status an object should have: the plugin's status
// when it gave one (keeping the observed conditions when it set none), else
// the observed status; with observedGeneration set to generation and the
// Ready condition set to ready. A Ready condition whose status does not change
// keeps its lastTransitionTime. observed is not modified.
func desiredStatus(observed, fromPlugin map[string]any, generation int64, ready readyCondition, now time.Time) map[string]any {
	var out map[string]any
	if fromPlugin != nil {
		out = deepCopyJSON(fromPlugin).(map[string]any)
		if _, ok := out["conditions"]; !ok && observed != nil {
			if c, ok := observed["conditions"]; ok {
				out["conditions"] = deepCopyJSON(c)
			}
		}
	} else if observed != nil {
		out = deepCopyJSON(observed).(map[string]any)
	} else {
		out = map[string]any{}
	}
	out["observedGeneration"] = generation
	conds, _ := out["conditions"].([]any)
	cond := map[string]any{
		"type":               ConditionReady,
		"status":             string(ready.status),
		"reason":             ready.reason,
		"message":            ready.text(),
		"observedGeneration": generation,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	replaced := false
	for i, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != ConditionReady {
			continue
		}
		if m["status"] == cond["status"] {
			if t, ok := m["lastTransitionTime"]; ok {
				cond["lastTransitionTime"] = t
			}
		}
		conds[i] = cond
		replaced = true
		break
	}
	if !replaced {
		conds = append(conds, cond)
	}
	out["conditions"] = conds
	return out
}

// readyOf returns the Ready condition of a status, if any.
func readyOf(status map[string]any) (map[string]any, bool) {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == ConditionReady {
			return m, true
		}
	}
	return nil, false
}

// Terminal reports whether obj's status records a terminal reconcile error
// at obj's generation: the object is not reconciled again until its
// generation changes, except once by a new run.
func Terminal(obj *unstructured.Unstructured) bool {
	status, _ := obj.Object["status"].(map[string]any)
	return terminalAt(status, obj.GetGeneration(), ReasonTerminalError)
}

// terminalAt reports whether status records a terminal error (of the given
// reason) for generation: such an object is not reconciled again until its
// generation changes.
func terminalAt(status map[string]any, generation int64, reason string) bool {
	c, ok := readyOf(status)
	if !ok || c["reason"] != reason {
		return false
	}
	g, ok := number(c["observedGeneration"])
	return ok && int64(g) == generation
}
