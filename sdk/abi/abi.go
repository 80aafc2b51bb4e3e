package abi

import "time"

// Version is the ABI version this package describes. A guest reports the
// version it was built against through ExportVersion; the host refuses a
// module whose version it does not support. Any change that an older guest
// or host could misread bumps it.
const Version = 1

// Names of the functions a guest exports. Reconcile and Admit are each
// optional, but a module must export at least one of them; Finalize is
// optional.
const (
	ExportReconcile = "reconcile"
	ExportAdmit     = "admit"
	ExportFinalize  = "finalize"
)

// Native-ABI exports that carry the memory protocol.
const (
	// ExportVersion is `setpoint_abi_version() -> i32`: the ABI version.
	ExportVersion = "setpoint_abi_version"
	// ExportAlloc is `setpoint_alloc(size i32) -> i32`: the address of a
	// guest-owned region of at least size bytes that the host may write
	// input documents into. The region stays valid and reserved for input
	// until the next setpoint_alloc call, so the host allocates once and
	// reuses the region for every call that fits. 0 means the guest could
	// not allocate.
	ExportAlloc = "setpoint_alloc"
)

// ExportHandlers is `setpoint_handlers() -> i32`, optional on both ABIs:
// the Handler bits of the handlers the guest registered, for a guest that
// exports all three handler functions whatever it registers (as the Go
// SDK's do). Without it the host goes by the exports.
const ExportHandlers = "setpoint_handlers"

// Handler bits, as ExportHandlers reports them.
const (
	HasReconcile = 1 << iota
	HasAdmit
	HasFinalize
)

// HostModule is the import module name of the native ABI's host functions.
// Each has the signature `(reqPtr, reqLen, outPtr, outCap i32) -> i32`: the
// host reads the request document at reqPtr, handles it, and writes the
// response document at outPtr when it fits in outCap bytes. It returns the
// length of the response; when that exceeds outCap the host keeps the
// response and the guest fetches it with HostResult into a region that is
// large enough.
const HostModule = "setpoint"

// Host function names, in HostModule for the native ABI and in
// ExtismUserModule for the Extism ABI.
const (
	HostLog       = "log"
	HostGet       = "get"
	HostList      = "list"
	HostEmitEvent = "emit_event"
	// HostCreate, HostUpdate, HostPatch and HostDelete write objects
	// (WriteRequest in, WriteResponse out), only of kinds the plugin may
	// write and never during an admit call. Added in ABI 1.1 (docs/ABI.md):
	// a module that imports them needs a host that offers them.
	HostCreate = "create"
	HostUpdate = "update"
	HostPatch  = "patch"
	HostDelete = "delete"
	// HostResult is `result(outPtr, outCap i32) -> i32` (native ABI only):
	// it copies the pending response of the last host call to outPtr and
	// returns its length.
	HostResult = "result"
)

// ExtismUserModule is the import module of host functions for Extism-ABI
// guests (the Extism default for user functions). Each takes and returns an
// Extism memory offset holding a JSON document.
const ExtismUserModule = "extism:host/user"

// FailureFlag is set in the low 32 bits of an export's packed i64 result when
// the output region holds a UTF-8 failure message (the guest recovered a panic
// or could not read its input) instead of a response document. The packed
// result is `ptr<<32 | flags|len`.
const FailureFlag = 1 << 31

// MaxDocumentLen is the largest document either side writes: lengths travel
// in 31 bits.
const MaxDocumentLen = FailureFlag - 1

// Operation is what an admission request is about.
type Operation string

// Admission operations.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// ObjectRef names one object.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        string
}

// GroupVersionKind names a kind at a version.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// UserInfo is who made an admitted request.
type UserInfo struct {
	Username string
	UID      string
	Groups   []string
}

// Event is an event a plugin asks the engine to record about its object.
type Event struct {
	// Type is "Normal" or "Warning".
	Type    string
	Reason  string
	Message string
}

// ReconcileRequest is the input of the reconcile export.
type ReconcileRequest struct {
	// Object is the object to reconcile, as stored.
	Object RawJSON
	// Children are the observed objects the object controls, keyed by kind
	// as "Kind.group" ("Kind" for the core group).
	Children map[string][]RawJSON
	// Attempt counts the consecutive failed attempts before this one; 0 on a
	// first try.
	Attempt int
	// Config is the plugin's configuration from its Plugin object.
	Config map[string]string
}

// ReconcileResponse is the output of the reconcile export.
type ReconcileResponse struct {
	// Status replaces the object's status when set.
	Status RawJSON
	// Children is the complete set of desired children: each a full object
	// with apiVersion, kind and metadata.name. Children the engine observes
	// but that are missing here are deleted.
	Children []RawJSON
	// RequeueAfter asks for another reconcile after the delay; 0 means none.
	RequeueAfter time.Duration
	// Events are recorded about the object.
	Events []Event
	// Error reports a failure; the engine backs off and retries unless
	// Terminal is set.
	Error string
	// Terminal marks Error as not worth retrying until the object changes.
	Terminal bool
}

// AdmissionRequest is the input of the admit export.
type AdmissionRequest struct {
	// UID identifies the request.
	UID       string
	Kind      GroupVersionKind
	Resource  string
	Namespace string
	Name      string
	Operation Operation
	// Object is the new object (CREATE, UPDATE); empty on DELETE.
	Object RawJSON
	// OldObject is the existing object (UPDATE, DELETE).
	OldObject RawJSON
	// DryRun is true when the request will not be persisted: a plugin must
	// have no side effects then.
	DryRun bool
	User   UserInfo
	Config map[string]string
}

// AdmissionResponse is the output of the admit export.
type AdmissionResponse struct {
	Allowed bool
	// Message explains a denial to the client.
	Message string
	// Code is the HTTP status of a denial; 0 means 403.
	Code int
	// Patch is an RFC 6902 JSON patch against Object (mutating plugins).
	Patch RawJSON
	// Object is the mutated object (mutating plugins), an alternative to
	// Patch.
	Object   RawJSON
	Warnings []string
}

// FinalizeRequest is the input of the finalize export, called while the
// object is being deleted and still carries the plugin's finalizer.
type FinalizeRequest struct {
	Object   RawJSON
	Children map[string][]RawJSON
	Attempt  int
	Config   map[string]string
}

// FinalizeResponse is the output of the finalize export.
type FinalizeResponse struct {
	// Done lets the engine remove the finalizer.
	Done         bool
	RequeueAfter time.Duration
	Events       []Event
	Error        string
	Terminal     bool
}

// LogRequest is the input of the log host function.
type LogRequest struct {
	// Level is "debug", "info", "warn" or "error".
	Level   string
	Message string
	Attrs   map[string]string
}

// GetRequest is the input of the get host function.
type GetRequest struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// GetResponse is the output of the get host function.
type GetResponse struct {
	Object RawJSON
	Found  bool
	Error  string
}

// ListRequest is the input of the list host function.
type ListRequest struct {
	APIVersion    string
	Kind          string
	Namespace     string
	LabelSelector string
	Limit         int
}

// ListResponse is the output of the list host function.
type ListResponse struct {
	Items []RawJSON
	Error string
}

// EmitEventRequest is the input of the emit_event host function.
type EmitEventRequest struct {
	Event
	// Regarding is the object the event is about; empty means the object of
	// the current call.
	Regarding ObjectRef
}

// HostResponse is the output of the log and emit_event host functions.
type HostResponse struct {
	Error string
}

// WriteRequest is the input of the create, update, patch and delete host
// functions.
type WriteRequest struct {
	// Object is the whole object to create or update (create, update): it
	// names itself with apiVersion, kind, metadata.name and, for a
	// namespaced kind, metadata.namespace ("default" when empty). An update
	// that carries metadata.resourceVersion fails with Conflict if the
	// object changed since.
	Object RawJSON
	// APIVersion, Kind, Namespace and Name name the object to patch or
	// delete.
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// Subresource is "" for the object or "status" for its status
	// subresource (update, patch).
	Subresource string
	// Patch is a JSON merge patch (RFC 7386) to apply (patch).
	Patch RawJSON
	// UID and ResourceVersion, when set, are preconditions of a delete.
	UID             string
	ResourceVersion string
}

// WriteResponse is the output of the write host functions.
type WriteResponse struct {
	// Object is the object as stored after a create, update or patch, and
	// after a delete the object as it was removed or as it now waits for
	// its finalizers.
	Object RawJSON
	// Error says why the write failed; Reason and Code are then the
	// Kubernetes status reason and HTTP code ("NotFound" 404,
	// "AlreadyExists" 409, "Conflict" 409, "Invalid" 422, "Forbidden" 403,
	// ...), so a guest can tell a lost race from a denial.
	Error  string
	Reason string
	Code   int
}
