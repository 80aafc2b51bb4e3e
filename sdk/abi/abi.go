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
	// HostHTTP sends an HTTP request to the outside world (HTTPRequest in,
	// HTTPResponse out), only to the URLs and methods the Plugin's
	// spec.egress grants. Added in ABI 1.2 (docs/ABI.md).
	HostHTTP = "http"
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
//
//abi:document
type ObjectRef struct {
	APIVersion string `abi:"apiVersion"`
	Kind       string `abi:"kind"`
	Namespace  string `abi:"namespace"`
	Name       string `abi:"name"`
	UID        string `abi:"uid"`
}

// RefOf reads the reference of an object document: apiVersion, kind,
// metadata.namespace, metadata.name and metadata.uid.
func RefOf(obj RawJSON) ObjectRef {
	return ObjectRef{
		APIVersion: obj.String("apiVersion"),
		Kind:       obj.String("kind"),
		Namespace:  obj.String("metadata", "namespace"),
		Name:       obj.String("metadata", "name"),
		UID:        obj.String("metadata", "uid"),
	}
}

// GroupVersionKind names a kind at a version.
type GroupVersionKind struct {
	Group   string `abi:"group"`
	Version string `abi:"version"`
	Kind    string `abi:"kind"`
}

// UserInfo is who made an admitted request.
type UserInfo struct {
	Username string   `abi:"username"`
	UID      string   `abi:"uid"`
	Groups   []string `abi:"groups"`
}

// Event is an event a plugin asks the engine to record about its object.
//
//abi:document
type Event struct {
	// Type is "Normal" or "Warning".
	Type    string `abi:"type"`
	Reason  string `abi:"reason"`
	Message string `abi:"message"`
}

// ReconcileRequest is the input of the reconcile export.
//
//abi:document aliased
type ReconcileRequest struct {
	// Attempt counts the consecutive failed attempts before this one; 0 on a
	// first try.
	Attempt int `abi:"attempt"`
	// Config is the plugin's configuration from its Plugin object.
	Config map[string]string `abi:"config"`
	// Children are the observed objects the object controls, keyed by kind
	// as "Kind.group" ("Kind" for the core group).
	Children map[string][]RawJSON `abi:"children"`
	// Object is the object to reconcile, as stored.
	Object RawJSON `abi:"object,last"`
}

// ReconcileResponse is the output of the reconcile export.
//
//abi:document owned
type ReconcileResponse struct {
	// Status replaces the object's status when set.
	Status RawJSON `abi:"status"`
	// Children is the complete set of desired children: each a full object
	// with apiVersion, kind and metadata.name. Children the engine observes
	// but that are missing here are deleted.
	Children []RawJSON `abi:"children"`
	// RequeueAfter asks for another reconcile after the delay; 0 means none.
	RequeueAfter time.Duration `abi:"requeueAfterMs"`
	// Events are recorded about the object.
	Events []Event `abi:"events"`
	// Error reports a failure; the engine backs off and retries unless
	// Terminal is set.
	Error string `abi:"error"`
	// Terminal marks Error as not worth retrying until the object changes.
	Terminal bool `abi:"terminal"`
}

// AdmissionRequest is the input of the admit export.
//
//abi:document aliased
type AdmissionRequest struct {
	// UID identifies the request.
	UID       string           `abi:"uid"`
	Kind      GroupVersionKind `abi:"kind"`
	Resource  string           `abi:"resource"`
	Namespace string           `abi:"namespace"`
	Name      string           `abi:"name"`
	Operation Operation        `abi:"operation"`
	// DryRun is true when the request will not be persisted: a plugin must
	// have no side effects then.
	DryRun bool              `abi:"dryRun"`
	User   UserInfo          `abi:"userInfo"`
	Config map[string]string `abi:"config"`
	// OldObject is the existing object (UPDATE, DELETE).
	OldObject RawJSON `abi:"oldObject"`
	// Object is the new object (CREATE, UPDATE); empty on DELETE.
	Object RawJSON `abi:"object,last"`
}

// AdmissionResponse is the output of the admit export.
//
//abi:document
type AdmissionResponse struct {
	Allowed bool `abi:"allowed,always"`
	// Message explains a denial to the client.
	Message string `abi:"message"`
	// Code is the HTTP status of a denial; 0 means 403.
	Code int `abi:"code"`
	// Patch is an RFC 6902 JSON patch against Object (mutating plugins).
	Patch RawJSON `abi:"patch"`
	// Object is the mutated object (mutating plugins), an alternative to
	// Patch.
	Object   RawJSON  `abi:"object"`
	Warnings []string `abi:"warnings"`
}

// FinalizeRequest is the input of the finalize export, called while the
// object is being deleted and still carries the plugin's finalizer.
//
//abi:document aliased
type FinalizeRequest struct {
	Attempt  int                  `abi:"attempt"`
	Config   map[string]string    `abi:"config"`
	Children map[string][]RawJSON `abi:"children"`
	Object   RawJSON              `abi:"object,last"`
}

// FinalizeResponse is the output of the finalize export.
//
//abi:document
type FinalizeResponse struct {
	// Done lets the engine remove the finalizer.
	Done         bool          `abi:"done,always"`
	RequeueAfter time.Duration `abi:"requeueAfterMs"`
	Events       []Event       `abi:"events"`
	Error        string        `abi:"error"`
	Terminal     bool          `abi:"terminal"`
}

// LogRequest is the input of the log host function.
//
//abi:document
type LogRequest struct {
	// Level is "debug", "info", "warn" or "error".
	Level   string            `abi:"level"`
	Message string            `abi:"message"`
	Attrs   map[string]string `abi:"attrs"`
}

// GetRequest is the input of the get host function.
//
//abi:document
type GetRequest struct {
	APIVersion string `abi:"apiVersion"`
	Kind       string `abi:"kind"`
	Namespace  string `abi:"namespace"`
	Name       string `abi:"name"`
}

// GetResponse is the output of the get host function.
//
//abi:document
type GetResponse struct {
	Object RawJSON `abi:"object"`
	Found  bool    `abi:"found,always"`
	Error  string  `abi:"error"`
}

// ListRequest is the input of the list host function.
//
//abi:document
type ListRequest struct {
	APIVersion    string `abi:"apiVersion"`
	Kind          string `abi:"kind"`
	Namespace     string `abi:"namespace"`
	LabelSelector string `abi:"labelSelector"`
	Limit         int    `abi:"limit"`
}

// ListResponse is the output of the list host function.
//
//abi:document
type ListResponse struct {
	// Items are written whenever Error is empty, an empty list as [].
	Items []RawJSON `abi:"items,result"`
	Error string    `abi:"error"`
}

// EmitEventRequest is the input of the emit_event host function.
//
//abi:document
type EmitEventRequest struct {
	Event
	// Regarding is the object the event is about; empty means the object of
	// the current call.
	Regarding ObjectRef `abi:"regarding"`
}

// HostResponse is the output of the log and emit_event host functions.
//
//abi:document
type HostResponse struct {
	Error string `abi:"error"`
}

// WriteRequest is the input of the create, update, patch and delete host
// functions.
//
//abi:document
type WriteRequest struct {
	// APIVersion, Kind, Namespace and Name name the object to patch or
	// delete.
	APIVersion string `abi:"apiVersion"`
	Kind       string `abi:"kind"`
	Namespace  string `abi:"namespace"`
	Name       string `abi:"name"`
	// Subresource is "" for the object or "status" for its status
	// subresource (update, patch).
	Subresource string `abi:"subresource"`
	// UID and ResourceVersion, when set, are preconditions of a delete.
	UID             string `abi:"uid"`
	ResourceVersion string `abi:"resourceVersion"`
	// Patch is a JSON merge patch (RFC 7386) to apply (patch).
	Patch RawJSON `abi:"patch"`
	// Object is the whole object to create or update (create, update): it
	// names itself with apiVersion, kind, metadata.name and, for a
	// namespaced kind, metadata.namespace ("default" when empty). An update
	// that carries metadata.resourceVersion fails with Conflict if the
	// object changed since.
	Object RawJSON `abi:"object"`
}

// WriteResponse is the output of the write host functions.
//
//abi:document
type WriteResponse struct {
	// Object is the object as stored after a create, update or patch, and
	// after a delete the object as it was removed or as it now waits for
	// its finalizers.
	Object RawJSON `abi:"object"`
	// Error says why the write failed; Reason and Code are then the
	// Kubernetes status reason and HTTP code ("NotFound" 404,
	// "AlreadyExists" 409, "Conflict" 409, "Invalid" 422, "Forbidden" 403,
	// ...), so a guest can tell a lost race from a denial.
	Error  string `abi:"error"`
	Reason string `abi:"reason"`
	Code   int    `abi:"code"`
}

// HTTPRequest is the input of the http host function: one request to the
// outside world.
//
//abi:document
type HTTPRequest struct {
	// Method is the HTTP method, upper case; empty means GET.
	Method string `abi:"method"`
	// URL is absolute: http or https, a host, an optional port.
	URL string `abi:"url"`
	// Headers are sent as given, one value each.
	Headers map[string]string `abi:"headers"`
	// Body is sent as the request body (base64 on the wire).
	Body []byte `abi:"body"`
}

// HTTPResponse is the output of the http host function. A response with any
// status is a response; Error is set instead when no response came (the call
// was not granted, or the transport failed), and Reason then classifies it.
//
//abi:document
type HTTPResponse struct {
	Status int32 `abi:"status"`
	// Headers are the response's headers, names in canonical form
	// (Content-Type), several values joined with ", ".
	Headers map[string]string `abi:"headers"`
	// Body is the response body (base64 on the wire), at most the grant's
	// maxResponseBytes.
	Body []byte `abi:"body"`
	// Error says why there is no response.
	Error string `abi:"error"`
	// Reason classifies Error: one of the HTTPReason constants.
	Reason string `abi:"reason"`
}

// Reasons an http host call gives no response (HTTPResponse.Reason).
const (
	// HTTPForbidden: the Plugin's spec.egress grants no such request.
	HTTPForbidden = "Forbidden"
	// HTTPTimeout: the call's timeout or deadline passed first.
	HTTPTimeout = "Timeout"
	// HTTPTooLarge: the response body exceeds maxResponseBytes.
	HTTPTooLarge = "TooLarge"
	// HTTPTLS: the server's certificate did not verify.
	HTTPTLS = "TLS"
	// HTTPUnavailable: the name did not resolve or the connection failed.
	HTTPUnavailable = "Unavailable"
	// HTTPBadRequest: the request is malformed (URL, method, headers).
	HTTPBadRequest = "BadRequest"
)
