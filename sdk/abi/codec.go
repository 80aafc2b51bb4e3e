package abi

import "time"

// Each document has:
//   - AppendJSON(b) appending its encoding (empty members omitted),
//   - MarshalJSON and UnmarshalJSON, so encoding/json uses the same format,
//   - decode, the member-by-member reader; unknown members are skipped so a
//     newer peer's additions do not break an older one.
// Requests also have DecodeAliased, whose RawJSON members and config strings
// alias the input instead of copying it, and which skips nested values
// without validating them (the input comes from the host): the guest SDK
// uses it on its reused input buffer.

func unmarshal(b []byte, alias bool, fn func(d *decoder, key []byte) bool) error {
	d := decoder{b: b, alias: alias}
	if !d.document() {
		return d.err
	}
	d.object(fn)
	return d.end()
}

func millis(d time.Duration) int64 { return int64(d / time.Millisecond) }

// AppendJSON appends the encoding of r to b.
// The object is the last member, so that DecodeAliased can take it
// without scanning it.
func (r *ReconcileRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.int("attempt", int64(r.Attempt))
	e.strMap("config", r.Config)
	e.rawListMap("children", r.Children)
	e.raw("object", r.Object)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *ReconcileRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *ReconcileRequest) UnmarshalJSON(b []byte) error { return r.decode(b, false) }

// DecodeAliased decodes b into r; r's RawJSON members, Config strings and
// the keys of Children and Config alias b, and the Children and Config
// maps r already holds are cleared and reused. b must be valid JSON written
// by AppendJSON, which puts the object last: DecodeAliased takes it without
// scanning it.
func (r *ReconcileRequest) DecodeAliased(b []byte) error { return r.decode(b, true) }

// decode reads a reconcile (or finalize) request. In alias mode it reuses
// the Children and Config maps r already holds, cleared: a guest decodes
// every call into the same request, and a map costs several allocations.
// It reads members in a loop rather than through callbacks, so that the
// decoder stays on the stack.
func (r *ReconcileRequest) decode(b []byte, alias bool) error {
	var children map[string][]RawJSON
	var config map[string]string
	if alias {
		// rawListMap and strMapInto clear them (the former after taking
		// the backing array of the old lists).
		children, config = r.Children, r.Config
	}
	*r = ReconcileRequest{}
	d := decoder{b: b, alias: alias}
	if !d.document() {
		return d.err
	}
	for first, open := true, d.open('{'); open; first = false {
		k, ok := d.member(first)
		if !ok {
			break
		}
		switch string(k) {
		case "object":
			r.Object = d.lastRaw()
		case "children":
			r.Children = d.rawListMap(children)
		case "attempt":
			r.Attempt = int(d.int())
		case "config":
			r.Config = d.strMapInto(config)
		default:
			d.skip(0)
		}
	}
	return d.end()
}

// AppendJSON appends the encoding of r to b.
func (r *ReconcileResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.raw("status", r.Status)
	e.rawList("children", r.Children)
	e.int("requeueAfterMs", millis(r.RequeueAfter))
	e.events("events", r.Events)
	e.str("error", r.Error)
	e.boolean("terminal", r.Terminal)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *ReconcileResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *ReconcileResponse) UnmarshalJSON(b []byte) error { return r.decode(b, false) }

// DecodeOwned decodes b, which the caller hands over and must not change
// afterwards, into r. It checks b like UnmarshalJSON, but r's RawJSON
// members alias b instead of each being copied: the host copies a guest's
// output once and decodes that copy.
func (r *ReconcileResponse) DecodeOwned(b []byte) error { return r.decode(b, true) }

func (r *ReconcileResponse) decode(b []byte, owned bool) error {
	*r = ReconcileResponse{}
	d := decoder{b: b, owned: owned}
	if !d.document() {
		return d.err
	}
	for first, open := true, d.open('{'); open; first = false {
		k, ok := d.member(first)
		if !ok {
			break
		}
		switch string(k) {
		case "status":
			r.Status = d.raw()
		case "children":
			r.Children = d.rawList()
		case "requeueAfterMs":
			r.RequeueAfter = time.Duration(d.int()) * time.Millisecond
		case "events":
			r.Events = decodeEvents(&d)
		case "error":
			r.Error = d.str()
		case "terminal":
			r.Terminal = d.boolean()
		default:
			d.skip(0)
		}
	}
	return d.end()
}

// AppendJSON appends the encoding of ev to b.
func (ev *Event) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("type", ev.Type)
	e.str("reason", ev.Reason)
	e.str("message", ev.Message)
	return e.close()
}

func (ev *Event) member(d *decoder, k []byte) bool {
	switch string(k) {
	case "type":
		ev.Type = d.str()
	case "reason":
		ev.Reason = d.str()
	case "message":
		ev.Message = d.str()
	default:
		return false
	}
	return true
}

func decodeEvents(d *decoder) []Event {
	var l []Event
	for first, open := true, d.open('['); open && d.element(first); first = false {
		var ev Event
		for f, open := true, d.open('{'); open; f = false {
			k, ok := d.member(f)
			if !ok {
				break
			}
			if !ev.member(d, k) {
				d.skip(0)
			}
		}
		l = append(l, ev)
	}
	return l
}

// AppendJSON appends the encoding of r to b.
func (r *AdmissionRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("uid", r.UID)
	if r.Kind != (GroupVersionKind{}) {
		e.key("kind")
		k := newEncoder(e.b)
		k.str("group", r.Kind.Group)
		k.str("version", r.Kind.Version)
		k.str("kind", r.Kind.Kind)
		e.b = k.close()
	}
	e.str("resource", r.Resource)
	e.str("namespace", r.Namespace)
	e.str("name", r.Name)
	e.str("operation", string(r.Operation))
	e.boolean("dryRun", r.DryRun)
	if r.User.Username != "" || r.User.UID != "" || len(r.User.Groups) != 0 {
		e.key("userInfo")
		u := newEncoder(e.b)
		u.str("username", r.User.Username)
		u.str("uid", r.User.UID)
		u.strList("groups", r.User.Groups)
		e.b = u.close()
	}
	e.strMap("config", r.Config)
	e.raw("oldObject", r.OldObject)
	e.raw("object", r.Object) // last, see ReconcileRequest.AppendJSON
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *AdmissionRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *AdmissionRequest) UnmarshalJSON(b []byte) error { return r.decode(b, false) }

// DecodeAliased decodes b into r; r's RawJSON members and Config strings
// alias b. b must be valid JSON written by AppendJSON, which puts the object
// last: DecodeAliased takes it without scanning it.
func (r *AdmissionRequest) DecodeAliased(b []byte) error { return r.decode(b, true) }

func (r *AdmissionRequest) decode(b []byte, alias bool) error {
	*r = AdmissionRequest{}
	return unmarshal(b, alias, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "uid":
			r.UID = d.str()
		case "kind":
			d.object(func(d *decoder, k []byte) bool {
				switch string(k) {
				case "group":
					r.Kind.Group = d.str()
				case "version":
					r.Kind.Version = d.str()
				case "kind":
					r.Kind.Kind = d.str()
				default:
					d.skip(0)
				}
				return true
			})
		case "resource":
			r.Resource = d.str()
		case "namespace":
			r.Namespace = d.str()
		case "name":
			r.Name = d.str()
		case "operation":
			r.Operation = Operation(d.str())
		case "object":
			r.Object = d.lastRaw()
		case "oldObject":
			r.OldObject = d.raw()
		case "dryRun":
			r.DryRun = d.boolean()
		case "userInfo":
			d.object(func(d *decoder, k []byte) bool {
				switch string(k) {
				case "username":
					r.User.Username = d.str()
				case "uid":
					r.User.UID = d.str()
				case "groups":
					r.User.Groups = d.strList()
				default:
					d.skip(0)
				}
				return true
			})
		case "config":
			r.Config = d.strMap()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *AdmissionResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.boolAlways("allowed", r.Allowed)
	e.str("message", r.Message)
	e.int("code", int64(r.Code))
	e.raw("patch", r.Patch)
	e.raw("object", r.Object)
	e.strList("warnings", r.Warnings)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *AdmissionResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *AdmissionResponse) UnmarshalJSON(b []byte) error {
	*r = AdmissionResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "allowed":
			r.Allowed = d.boolean()
		case "message":
			r.Message = d.str()
		case "code":
			r.Code = int(d.int())
		case "patch":
			r.Patch = d.raw()
		case "object":
			r.Object = d.raw()
		case "warnings":
			r.Warnings = d.strList()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *FinalizeRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.int("attempt", int64(r.Attempt))
	e.strMap("config", r.Config)
	e.rawListMap("children", r.Children)
	e.raw("object", r.Object) // last, see ReconcileRequest.AppendJSON
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *FinalizeRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *FinalizeRequest) UnmarshalJSON(b []byte) error { return r.decode(b, false) }

// DecodeAliased decodes b into r; r's RawJSON members and Config strings
// alias b. b must be valid JSON written by AppendJSON, which puts the object
// last: DecodeAliased takes it without scanning it.
func (r *FinalizeRequest) DecodeAliased(b []byte) error { return r.decode(b, true) }

func (r *FinalizeRequest) decode(b []byte, alias bool) error {
	var rr ReconcileRequest
	err := rr.decode(b, alias)
	*r = FinalizeRequest{Object: rr.Object, Children: rr.Children, Attempt: rr.Attempt, Config: rr.Config}
	return err
}

// AppendJSON appends the encoding of r to b.
func (r *FinalizeResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.boolAlways("done", r.Done)
	e.int("requeueAfterMs", millis(r.RequeueAfter))
	e.events("events", r.Events)
	e.str("error", r.Error)
	e.boolean("terminal", r.Terminal)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *FinalizeResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *FinalizeResponse) UnmarshalJSON(b []byte) error {
	*r = FinalizeResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "done":
			r.Done = d.boolean()
		case "requeueAfterMs":
			r.RequeueAfter = time.Duration(d.int()) * time.Millisecond
		case "events":
			r.Events = decodeEvents(d)
		case "error":
			r.Error = d.str()
		case "terminal":
			r.Terminal = d.boolean()
		default:
			d.skip(0)
		}
		return true
	})
}

// MarshalJSON implements json.Marshaler.
func (ev *Event) MarshalJSON() ([]byte, error) { return ev.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (ev *Event) UnmarshalJSON(b []byte) error {
	*ev = Event{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		if !ev.member(d, k) {
			d.skip(0)
		}
		return true
	})
}
