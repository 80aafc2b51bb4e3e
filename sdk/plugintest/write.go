package plugintest

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

var _ plugin.Writer = (*Host)(nil)

// WriteEntry is one write a plugin asked for, recorded whether it succeeded
// or not.
type WriteEntry struct {
	// Func is plugin.HostCreate, HostUpdate, HostPatch or HostDelete.
	Func    plugin.HostFunc
	Request abi.WriteRequest
	// Err is the error the plugin got, nil if the write succeeded.
	Err error
}

// Write implements plugin.Writer over the objects Add and earlier writes
// made visible, with the server's answers: AlreadyExists on a create of an
// existing object, NotFound on a write of a missing one, Conflict on a stale
// metadata.resourceVersion or a UID precondition that does not hold, Invalid
// on an update without a resourceVersion (but of a Namespace or Event), and
// Forbidden when DenyWrite denies the kind. Writes get a fresh
// resourceVersion (and a create a uid); an update keeps the stored status
// and a status update keeps everything else, as the server does for kinds
// with a status subresource. Namespaces are taken as given, without the
// server's defaulting, and nothing is validated.
func (h *Host) Write(fn plugin.HostFunc, req abi.WriteRequest) (abi.RawJSON, error) {
	out, err := h.write(fn, req)
	h.mu.Lock()
	h.Writes = append(h.Writes, WriteEntry{Func: fn, Request: req, Err: err})
	h.mu.Unlock()
	return out, err
}

func (h *Host) write(fn plugin.HostFunc, req abi.WriteRequest) (abi.RawJSON, error) {
	ref := abi.ObjectRef{APIVersion: req.APIVersion, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name}
	var obj map[string]any
	if fn == plugin.HostCreate || fn == plugin.HostUpdate {
		if err := json.Unmarshal(req.Object, &obj); err != nil {
			return nil, invalid("object: " + err.Error())
		}
		ref = abi.RefOf(req.Object)
	}
	if ref.Kind == "" || ref.Name == "" {
		return nil, invalid("the object names no kind or no name")
	}
	if req.Subresource != "" && (req.Subresource != "status" || fn == plugin.HostCreate || fn == plugin.HostDelete) {
		return nil, &plugin.WriteError{Reason: plugin.ReasonNotFound, Code: 404, Message: "no subresource " + req.Subresource}
	}
	if h.DenyWrite != nil {
		if err := h.DenyWrite(ref.Kind); err != nil {
			return nil, &plugin.WriteError{Reason: plugin.ReasonForbidden, Code: 403, Message: "host: permission denied: " + err.Error()}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.find(ref)
	if fn == plugin.HostCreate {
		if i >= 0 {
			return nil, &plugin.WriteError{Reason: plugin.ReasonAlreadyExists, Code: 409, Message: fmt.Sprintf("%s %q already exists", ref.Kind, ref.Name)}
		}
		h.rev++
		meta, _ := obj["metadata"].(map[string]any)
		meta["uid"] = fmt.Sprintf("uid-%d", h.rev)
		meta["resourceVersion"] = strconv.Itoa(h.rev)
		b, _ := json.Marshal(obj)
		h.objects = append(h.objects, b)
		return b, nil
	}
	if i < 0 {
		return nil, &plugin.WriteError{Reason: plugin.ReasonNotFound, Code: 404, Message: fmt.Sprintf("%s %q not found", ref.Kind, ref.Name)}
	}
	var stored map[string]any
	if err := json.Unmarshal(h.objects[i], &stored); err != nil {
		return nil, err
	}
	storedMeta, _ := stored["metadata"].(map[string]any)
	conflict := &plugin.WriteError{Reason: plugin.ReasonConflict, Code: 409,
		Message: fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified", ref.Kind, ref.Name)}
	switch fn {
	case plugin.HostDelete:
		if (req.UID != "" && req.UID != storedMeta["uid"]) || (req.ResourceVersion != "" && req.ResourceVersion != storedMeta["resourceVersion"]) {
			return nil, conflict
		}
		out := h.objects[i]
		h.objects = append(h.objects[:i], h.objects[i+1:]...)
		return out, nil
	case plugin.HostUpdate:
		meta, _ := obj["metadata"].(map[string]any)
		rv, _ := meta["resourceVersion"].(string)
		if rv == "" && ref.Kind != "Namespace" && ref.Kind != "Event" {
			return nil, invalid(fmt.Sprintf("%s %q is invalid: metadata.resourceVersion: Invalid value: \"\": must be specified for an update", ref.Kind, ref.Name))
		}
		if rv != "" && rv != storedMeta["resourceVersion"] {
			return nil, conflict
		}
		if req.Subresource == "status" {
			stored["status"] = obj["status"]
			obj = stored
		} else {
			obj["status"] = stored["status"]
			meta["uid"] = storedMeta["uid"]
		}
	case plugin.HostPatch:
		var patch any
		if err := json.Unmarshal(req.Patch, &patch); err != nil {
			return nil, invalid("patch: " + err.Error())
		}
		patched, _ := mergePatch(stored, patch).(map[string]any)
		if req.Subresource == "status" {
			stored["status"] = patched["status"]
		} else {
			patched["status"] = stored["status"]
			stored = patched
		}
		obj = stored
	default:
		return nil, invalid(fmt.Sprintf("host function %d does not write", fn))
	}
	if obj["status"] == nil {
		delete(obj, "status")
	}
	h.rev++
	meta, _ := obj["metadata"].(map[string]any)
	meta["resourceVersion"] = strconv.Itoa(h.rev)
	b, _ := json.Marshal(obj)
	h.objects[i] = b
	return b, nil
}

// find returns the index of the object ref names, or -1. h.mu is held.
func (h *Host) find(ref abi.ObjectRef) int {
	for i, o := range h.objects {
		r := abi.RefOf(o)
		if r.Kind == ref.Kind && r.Name == ref.Name && r.Namespace == ref.Namespace &&
			(ref.APIVersion == "" || r.APIVersion == ref.APIVersion) {
			return i
		}
	}
	return -1
}

// mergePatch applies an RFC 7386 merge patch to doc.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	out := make(map[string]any, len(d))
	for k, v := range d {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

func invalid(msg string) error {
	return &plugin.WriteError{Reason: plugin.ReasonInvalid, Code: 422, Message: msg}
}
