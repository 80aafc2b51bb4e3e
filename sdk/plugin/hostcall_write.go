package plugin

import (
	"errors"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Writer is a Host that writes objects through the create, update, patch and
// delete host functions (ABI 1.1). The Hosts of sdk/guest, sdk/extism and
// sdk/plugintest implement it; handlers use it through Create, Update,
// UpdateStatus, Patch, PatchStatus and Delete.
//
// The server runs each write through validation and admission like any
// client write, attributed to the plugin. It refuses writes of kinds the
// plugin's permissions do not list and every write during an admit call.
type Writer interface {
	// Write sends req to the host function fn (HostCreate, HostUpdate,
	// HostPatch or HostDelete) and returns the object of the answer. A
	// write the server refused or failed is a *WriteError.
	Write(fn HostFunc, req abi.WriteRequest) (abi.RawJSON, error)
}

// Kubernetes status reasons a write may fail with (WriteError.Reason).
const (
	ReasonNotFound         = "NotFound"
	ReasonAlreadyExists    = "AlreadyExists"
	ReasonConflict         = "Conflict"
	ReasonInvalid          = "Invalid"
	ReasonForbidden        = "Forbidden"
	ReasonMethodNotAllowed = "MethodNotAllowed"
)

// WriteError is a write the server refused or failed: the Kubernetes status
// reason and HTTP code (e.g. Conflict 409 for a stale resourceVersion,
// Forbidden 403 for a denied permission or admission) and the message.
type WriteError struct {
	Reason  string
	Code    int
	Message string
}

func (e *WriteError) Error() string { return e.Message }

// ReasonOf returns the reason of the *WriteError or *HTTPError in err's
// chain, or "".
func ReasonOf(err error) string {
	var we *WriteError
	if errors.As(err, &we) {
		return we.Reason
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Reason
	}
	return ""
}

// IsNotFound reports whether err is a write that found no such object.
func IsNotFound(err error) bool { return ReasonOf(err) == ReasonNotFound }

// IsAlreadyExists reports whether err is a create of an existing object.
func IsAlreadyExists(err error) bool { return ReasonOf(err) == ReasonAlreadyExists }

// IsConflict reports whether err is a write that lost a race (a stale
// resourceVersion or precondition).
func IsConflict(err error) bool { return ReasonOf(err) == ReasonConflict }

// IsForbidden reports whether err is a write denied by the plugin's
// permissions, by admission, or because the call may not write, or an HTTP
// call the Plugin's spec.egress does not grant.
func IsForbidden(err error) bool { return ReasonOf(err) == ReasonForbidden }

// Create creates obj (a whole object with apiVersion, kind and metadata) and
// returns it as stored.
func Create(h Host, obj abi.RawJSON) (abi.RawJSON, error) {
	return write(h, HostCreate, abi.WriteRequest{Object: obj})
}

// Update replaces obj (but not its status, on a kind with a status
// subresource); with metadata.resourceVersion set it fails with Conflict if
// the object changed since.
func Update(h Host, obj abi.RawJSON) (abi.RawJSON, error) {
	return write(h, HostUpdate, abi.WriteRequest{Object: obj})
}

// UpdateStatus replaces the status of obj (its status subresource).
func UpdateStatus(h Host, obj abi.RawJSON) (abi.RawJSON, error) {
	return write(h, HostUpdate, abi.WriteRequest{Object: obj, Subresource: "status"})
}

// Patch applies a JSON merge patch to the object ref names.
func Patch(h Host, ref abi.ObjectRef, mergePatch []byte) (abi.RawJSON, error) {
	return write(h, HostPatch, patchRequest(ref, mergePatch, ""))
}

// PatchStatus applies a JSON merge patch to the status of the object ref
// names, e.g. {"status":{"state":"Ready"}}.
func PatchStatus(h Host, ref abi.ObjectRef, mergePatch []byte) (abi.RawJSON, error) {
	return write(h, HostPatch, patchRequest(ref, mergePatch, "status"))
}

// Delete deletes the object ref names; ref.UID, when set, is a precondition.
func Delete(h Host, ref abi.ObjectRef) error {
	_, err := write(h, HostDelete, abi.WriteRequest{
		APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID,
	})
	return err
}

func patchRequest(ref abi.ObjectRef, mergePatch []byte, sub string) abi.WriteRequest {
	return abi.WriteRequest{
		APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name,
		Subresource: sub, Patch: mergePatch,
	}
}

func write(h Host, fn HostFunc, req abi.WriteRequest) (abi.RawJSON, error) {
	w, ok := h.(Writer)
	if !ok {
		return nil, &WriteError{Reason: ReasonMethodNotAllowed, Code: 405, Message: "plugin: this host does not write objects"}
	}
	return w.Write(fn, req)
}

// Write implements Writer.
func (h *callHost) Write(fn HostFunc, req abi.WriteRequest) (abi.RawJSON, error) {
	h.buf = req.AppendJSON(h.buf[:0])
	var resp abi.WriteResponse
	if err := resp.UnmarshalJSON(h.call(fn, h.buf)); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, &WriteError{Reason: resp.Reason, Code: resp.Code, Message: resp.Error}
	}
	return resp.Object, nil
}
