package operator

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// ConditionSynced is the plugin's condition: whether the service's record
// matches the spec. (The engine keeps Ready: whether the last reconcile
// succeeded, with the error and the retry count when it did not.)
const ConditionSynced = "Synced"

// Reasons of the Synced condition.
const (
	// ReasonInSync: the service holds the record as the spec says.
	ReasonInSync = "InSync"
	// ReasonPending: the service has not shown the record yet (its reads
	// lag its writes); it is read again shortly.
	ReasonPending = "Pending"
	// ReasonSyncFailed: talking to the service failed; the message says
	// what, and the engine retries with backoff.
	ReasonSyncFailed = "SyncFailed"
)

// Condition is a status condition as the plugin writes it; the engine
// fills lastTransitionTime.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// synced returns the Synced condition of a status, if any.
func (s Status) synced() (Condition, bool) {
	for _, c := range s.Conditions {
		if c.Type == ConditionSynced {
			return c, true
		}
	}
	return Condition{}, false
}

// syncedAt reports whether the record matched the spec of generation: a
// difference found now is then drift, not a new spec.
func (s Status) syncedAt(generation int64) bool {
	return s.SyncedGeneration == generation
}

// withSynced returns s with its Synced condition set to c (keeping the
// observed lastTransitionTime when the status did not change) and the
// other conditions but Ready, which the engine owns.
func (s Status) withSynced(c Condition) Status {
	out := s
	out.Conditions = nil
	for _, o := range s.Conditions {
		switch o.Type {
		case ConditionSynced:
			if o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		case "Ready":
		default:
			out.Conditions = append(out.Conditions, o)
		}
	}
	out.Conditions = append(out.Conditions, c)
	return out
}

func (s Status) encode() abi.RawJSON {
	b, _ := json.Marshal(s) // strings and integers only
	return b
}
