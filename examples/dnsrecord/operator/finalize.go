package operator

import (
	"fmt"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Finalize runs while a DNSRecord is being deleted: it deletes the
// service's record (by the ID in status, and any other record of the
// object's name and type that the object created, in case an ID was never
// recorded), then lets the deletion finish. A record already gone (404) is
// not an error. Any other failure is returned, and the engine retries with
// backoff while the object waits.
func (op *Operator) Finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	obj, err := decode(req.Object)
	if err != nil {
		return nil, plugin.Terminal(err)
	}
	cfg, err := configOf(req.Config)
	if err != nil {
		return &abi.FinalizeResponse{Error: err.Error(), Terminal: true}, nil
	}
	svc, err := op.connect(h, cfg, obj.Metadata.Namespace)
	if err != nil {
		return &abi.FinalizeResponse{Error: "delete the external record: " + err.Error()}, nil
	}
	sp := obj.Spec
	ids := []string{}
	if id := obj.Status.ExternalID; id != "" {
		ids = append(ids, id)
	}
	recs, err := svc.find(sp.Zone, sp.Name, sp.Type)
	if err != nil {
		return &abi.FinalizeResponse{Error: err.Error()}, nil
	}
	for _, r := range recs {
		if r.Owner == obj.Metadata.UID && r.ID != obj.Status.ExternalID {
			ids = append(ids, r.ID)
		}
	}
	var deleted, gone []string
	for _, id := range ids {
		found, err := svc.remove(sp.Zone, id)
		if err != nil {
			return &abi.FinalizeResponse{Error: err.Error()}, nil
		}
		if found {
			deleted = append(deleted, id)
		} else {
			gone = append(gone, id)
		}
	}
	var msg string
	switch {
	case len(deleted) > 0:
		msg = fmt.Sprintf("deleted record %s.%s %s (%s)", sp.Name, sp.Zone, sp.Type, strings.Join(deleted, ", "))
	case len(gone) > 0:
		msg = fmt.Sprintf("record %s.%s %s (%s) was already gone", sp.Name, sp.Zone, sp.Type, strings.Join(gone, ", "))
	default:
		msg = fmt.Sprintf("no record %s.%s %s to delete", sp.Name, sp.Zone, sp.Type)
	}
	return &abi.FinalizeResponse{Done: true, Events: []abi.Event{{Type: "Normal", Reason: EventDeleted, Message: msg}}}, nil
}
