package operator

import (
	"errors"
	"fmt"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Event reasons the plugin records on a DNSRecord.
const (
	EventCreated       = "Created"
	EventAdopted       = "Adopted"
	EventUpdated       = "Updated"
	EventDriftRepaired = "DriftRepaired"
	EventDeleted       = "Deleted"
)

// Reconcile makes the service's record match the object's spec and
// reports what it found in status (externalID, externalVersion, Synced).
// On success it asks to be called again after the resync period, which is
// when drift is caught; on a failure it returns the error in the response,
// with the status saying what failed, and the engine backs off and
// retries.
func (op *Operator) Reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	obj, err := decode(req.Object)
	if err != nil {
		return nil, plugin.Terminal(err)
	}
	cfg, err := configOf(req.Config)
	if err != nil {
		// Fixed by changing the Plugin, which reconciles every object again.
		return failed(obj, obj.Status, err, true), nil
	}
	svc, err := op.connect(h, cfg, obj.Metadata.Namespace)
	if err != nil {
		return failed(obj, obj.Status, err, false), nil
	}
	s := &syncer{svc: svc, obj: obj, st: obj.Status}
	requeue, err := s.sync()
	if err != nil {
		// The service refusing the record as invalid answers the same
		// until the spec changes; anything else may pass on a retry.
		// The status keeps what this reconcile learned (an ID adopted).
		resp := failed(obj, s.st, err, isInvalid(err))
		resp.Events = s.events
		return resp, nil
	}
	if requeue == 0 {
		requeue = cfg.resyncPeriod
	}
	return &abi.ReconcileResponse{Status: s.st.encode(), RequeueAfter: requeue, Events: s.events}, nil
}

// failed is the response that reports err: the status st with Synced False
// saying what failed (the engine's Ready says it too, with the retry
// count).
func failed(obj *DNSRecord, st Status, err error, terminal bool) *abi.ReconcileResponse {
	st = st.withSynced(condition(obj, "False", ReasonSyncFailed, err.Error()))
	return &abi.ReconcileResponse{Status: st.encode(), Error: err.Error(), Terminal: terminal}
}

func condition(obj *DNSRecord, status, reason, msg string) Condition {
	return Condition{Type: ConditionSynced, Status: status, Reason: reason, Message: msg, ObservedGeneration: obj.Metadata.Generation}
}

// syncer brings one object's record in line, collecting the status and
// events to report.
type syncer struct {
	svc    *service
	obj    *DNSRecord
	st     Status
	events []abi.Event
}

func (s *syncer) event(typ, reason, format string, args ...any) {
	s.events = append(s.events, abi.Event{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// desired is the record the spec asks for.
func (s *syncer) desired() Record {
	sp := s.obj.Spec
	return Record{Zone: sp.Zone, Name: sp.Name, Type: sp.Type, Value: sp.Value, TTL: sp.TTL, Owner: s.obj.Metadata.UID}
}

// sync reads the record, creates or repairs it, and sets s.st. It returns
// a requeue delay when the record is to be read again sooner than the
// resync period.
func (s *syncer) sync() (requeue time.Duration, err error) {
	want := s.desired()
	rec, found, err := s.lookup(want)
	if err != nil {
		return 0, err
	}
	if !found {
		created, err := s.svc.create(want)
		var exists *ExistsError
		switch {
		case errors.As(err, &exists):
			// The service holds it though reads did not show it: a create
			// whose answer was lost, or one reads do not show yet.
			if err := s.ours(exists.Record); err != nil {
				return 0, err
			}
			rec = exists.Record
		case err != nil:
			return 0, err
		case s.st.ExternalID != "":
			// Writes see the latest state: the record is gone for sure.
			s.event("Warning", EventDriftRepaired, "record %s was deleted outside Setpoint; created %s as %s", s.st.ExternalID, created, created.ID)
			s.st.ExternalVersion = 0
			s.inSync(created)
			return 0, nil
		default:
			s.event("Normal", EventCreated, "created record %s as %s", created, created.ID)
			s.inSync(created)
			return 0, nil
		}
	}
	if rec.ID != s.st.ExternalID {
		if s.st.ExternalID != "" {
			s.event("Warning", EventDriftRepaired, "record %s is gone from the service; found %s as %s", s.st.ExternalID, rec, rec.ID)
		} else {
			s.event("Normal", EventAdopted, "found record %s as %s", rec, rec.ID)
		}
		s.st.ExternalID, s.st.ExternalVersion = rec.ID, 0
	}
	if rec.Version < s.st.ExternalVersion {
		// A stale read: the service has not caught up with the plugin's
		// own write yet. Not drift; look again shortly.
		s.pending(fmt.Sprintf("the service shows record %s at version %d, older than version %d written; reading it again", rec.ID, rec.Version, s.st.ExternalVersion))
		return StaleRecheck, nil
	}
	if rec.Value == want.Value && rec.TTL == want.TTL {
		s.inSync(rec)
		return 0, nil
	}
	drift := s.st.syncedAt(s.obj.Metadata.Generation)
	upd, err := s.svc.update(want.Zone, rec.ID, want.Value, want.TTL)
	if isNotFound(err) {
		s.st.ExternalID, s.st.ExternalVersion = "", 0 // gone meanwhile: the retry creates it
	}
	if err != nil {
		return 0, err
	}
	if drift {
		s.event("Warning", EventDriftRepaired, "record %s was changed outside Setpoint to %s %d; set back to %s", rec.ID, rec.Value, rec.TTL, upd)
	} else {
		s.event("Normal", EventUpdated, "updated record %s to %s", rec.ID, upd)
	}
	s.inSync(upd)
	return 0, nil
}

// lookup finds the object's record: by the ID in status, else by name and
// type. A record of that name that another client created is an error, not
// something to take over.
func (s *syncer) lookup(want Record) (Record, bool, error) {
	if id := s.st.ExternalID; id != "" {
		rec, found, err := s.svc.get(want.Zone, id)
		if err != nil || found {
			return rec, found, err
		}
		// Gone, or not visible yet: look it up by name as if new.
	}
	recs, err := s.svc.find(want.Zone, want.Name, want.Type)
	if err != nil {
		return Record{}, false, err
	}
	if len(recs) == 0 {
		return Record{}, false, nil
	}
	// The service keeps one record per zone, name and type.
	if err := s.ours(recs[0]); err != nil {
		return Record{}, false, err
	}
	return recs[0], true, nil
}

// ours refuses a record another client created.
func (s *syncer) ours(r Record) error {
	if r.Owner != s.obj.Metadata.UID {
		return fmt.Errorf("record %s exists as %s and belongs to someone else (owner %q); delete it in the service or choose another name", r, r.ID, r.Owner)
	}
	return nil
}

func (s *syncer) inSync(r Record) {
	s.st.ExternalID = r.ID
	s.st.ExternalVersion = max(s.st.ExternalVersion, r.Version)
	s.st.SyncedGeneration = s.obj.Metadata.Generation
	s.st = s.st.withSynced(condition(s.obj, "True", ReasonInSync, fmt.Sprintf("record %s is %s, version %d", r.ID, r, r.Version)))
}

// pending reports a stale read: a Synced True that holds for this
// generation stays (the plugin's write succeeded; only reads lag), else
// Synced is Unknown until the service shows the record.
func (s *syncer) pending(msg string) {
	if c, ok := s.st.synced(); ok && c.Status == "True" && s.st.syncedAt(s.obj.Metadata.Generation) {
		return
	}
	s.st = s.st.withSynced(condition(s.obj, "Unknown", ReasonPending, msg))
}
