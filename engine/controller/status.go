package controller

import (
	"fmt"
	"time"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
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
	// ReasonStatusRefused: the server refused the status the plugin
	// returned (forbidden, too large); the object keeps its status and the
	// write is retried with backoff. A status refused as invalid is a
	// TerminalError.
	ReasonStatusRefused = "StatusRefused"
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
	// detail follows message in the condition (the retry count); it is not
	// part of the event, so the recorder counts a repeated failure into the
	// Event written for the first attempt.
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
// Ready condition set to ready. observed is not modified.
//
// Transition times follow meta.SetStatusCondition, so that a reconcile that
// changes nothing computes the observed status again and writes nothing: the
// Ready condition keeps the observed one's lastTransitionTime while its
// status stays the same (whatever the plugin's list holds), and so does a
// condition of the plugin's that leaves lastTransitionTime empty; such a
// condition that is new, or whose status changed, gets now. A
// lastTransitionTime the plugin sets is kept as it is.
func desiredStatus(observed, fromPlugin map[string]any, generation int64, ready readyCondition, now time.Time) map[string]any {
	var out map[string]any
	stamp := now.UTC().Format(time.RFC3339)
	if fromPlugin != nil {
		out = deepCopyJSON(fromPlugin).(map[string]any)
		if _, ok := out["conditions"]; !ok && observed != nil {
			if c, ok := observed["conditions"]; ok {
				out["conditions"] = deepCopyJSON(c)
			}
		} else if conds, ok := out["conditions"].([]any); ok {
			keepTransitionTimes(conds, observed, stamp)
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
		"lastTransitionTime": stamp,
	}
	if prev, ok := readyOf(observed); ok && prev["status"] == cond["status"] {
		if t, ok := prev["lastTransitionTime"]; ok {
			cond["lastTransitionTime"] = t
		}
	}
	replaced := false
	for i, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != ConditionReady {
			continue
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

// keepTransitionTimes fills the empty lastTransitionTime of the plugin's
// conditions (but Ready, which desiredStatus sets): the observed condition's
// of the same type when its status is the same, else now. It modifies conds.
func keepTransitionTimes(conds []any, observed map[string]any, now string) {
	prev := map[string]map[string]any{}
	if old, ok := observed["conditions"].([]any); ok {
		for _, c := range old {
			if m, ok := c.(map[string]any); ok {
				if t, ok := m["type"].(string); ok {
					prev[t] = m
				}
			}
		}
	}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] == ConditionReady {
			continue
		}
		if t := m["lastTransitionTime"]; t != nil && t != "" {
			continue
		}
		typ, _ := m["type"].(string)
		p, ok := prev[typ]
		switch {
		case !ok || p["status"] != m["status"]:
			m["lastTransitionTime"] = now
		case p["lastTransitionTime"] != nil:
			m["lastTransitionTime"] = p["lastTransitionTime"]
		default:
			// The observed condition has none (a schema that prunes
			// it): adding one would be a write on every reconcile.
			delete(m, "lastTransitionTime")
		}
	}
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
	g, ok := objjson.Integer(c["observedGeneration"])
	return ok && g == generation
}
