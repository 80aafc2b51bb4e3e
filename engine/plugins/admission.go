package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Admitter dispatches each write to the admission plugins bound to its
// resource and operation: mutating plugins from Mutate (before schema
// validation), validating ones from Validate (after it), each in plugin name
// order. Plugin objects themselves are never admitted by plugins, so a
// failing plugin can always be fixed or removed; nor are the
// coordination.k8s.io Leases that elect the controllers, so that a failing
// plugin bound to "*" cannot stop every replica from renewing its leases.
type Admitter struct {
	log      *slog.Logger
	bindings atomic.Pointer[[]*admissionBinding]
	// gate holds writes until the plugins stored at startup have loaded.
	gate atomic.Pointer[startupGate]
	// loading hold writes until the Plugins in their first load on this
	// replica have loaded, by name (see openLoading); guarded by loadMu.
	loadMu  sync.Mutex
	loading map[string]*startupGate
	// privileged are the plugins whose spec sets spec.privileged.
	privileged atomic.Pointer[map[string]bool]
	// installers, when set, resolves the rules of a Plugin's writer.
	installers atomic.Pointer[RuleResolver]
}

var _ engine.Admitter = (*Admitter)(nil)

// leases are the coordination.k8s.io Leases of leader election, which no
// plugin admits and the startup gate does not hold.
var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// admissionBinding is one admission rule of one loaded plugin.
type admissionBinding struct {
	plugin    string
	caller    Caller
	resources []string // "*", or "plural[/subresource].group"
	ops       []string // empty: all
	mutating  bool
	ignore    bool // failurePolicy Ignore
	config    map[string]string
	// privileged: the plugin may mutate resources that can grant
	// privileges, which "*" then covers too.
	privileged bool
}

// NewAdmitter returns an admission chain with no bindings that holds every
// write it may bind until a Manager given it (Options.Admitter) has listed
// the stored Plugins. Give the same Admitter to the engine
// (engine.Options.Admitter), so that the engine has its admission chain from
// the start and the Manager keeps it in step with the loaded plugins.
func NewAdmitter(log *slog.Logger) *Admitter {
	if log == nil {
		log = slog.Default()
	}
	a := &Admitter{log: log}
	a.bindings.Store(&[]*admissionBinding{})
	a.privileged.Store(&map[string]bool{})
	// Until the Manager has listed the stored Plugins, every write waits.
	a.gate.Store(&startupGate{done: make(chan struct{}), resources: []string{"*"}, wait: DefaultStartupWait})
	return a
}

// set replaces the bindings; calls in flight keep the ones they started with.
func (a *Admitter) set(bs []*admissionBinding) {
	slices.SortStableFunc(bs, func(x, y *admissionBinding) int { return strings.Compare(x.plugin, y.plugin) })
	a.bindings.Store(&bs)
}

func (b *admissionBinding) matches(req *engine.AdmissionRequest) bool {
	if len(b.ops) > 0 && !slices.Contains(b.ops, string(req.Operation)) {
		return false
	}
	res := req.Resource.Resource
	if req.Subresource != "" {
		res += "/" + req.Subresource
	}
	name := schema.GroupResource{Group: req.Resource.Group, Resource: res}.String()
	for _, r := range b.resources {
		if r == name || (r == "*" && req.Subresource == "") {
			return true
		}
	}
	return false
}

// Mutate implements engine.Admitter: it calls changing just before a
// mutating plugin's patch or object replaces req.Object, so a write that
// no mutating plugin changes is never copied for comparison.
func (a *Admitter) Mutate(ctx context.Context, req *engine.AdmissionRequest, changing func()) error {
	return a.admit(ctx, req, true, changing)
}

// Validate implements engine.Admitter.
func (a *Admitter) Validate(ctx context.Context, req *engine.AdmissionRequest) error {
	if err := a.checkInstaller(ctx, req); err != nil {
		return err
	}
	if err := validateEgress(req); err != nil {
		return err
	}
	return a.admit(ctx, req, false, nil)
}

// admit runs the bindings of one kind; changing (mutating only) is called
// before a plugin's answer changes req.Object.
func (a *Admitter) admit(ctx context.Context, req *engine.AdmissionRequest, mutating bool, changing func()) error {
	if err := a.checkPrivileged(req); err != nil {
		return err
	}
	if !mutating {
		if err := reservedGroup(req); err != nil {
			return err
		}
	}
	if gr := req.Resource.GroupResource(); gr == Resource.GroupResource() || gr == leases {
		return nil
	}
	if err := a.hold(ctx, req); err != nil {
		return err
	}
	if err := a.holdLoading(ctx, req); err != nil {
		return err
	}
	var in *abi.AdmissionRequest
	for _, b := range *a.bindings.Load() {
		if b.mutating != mutating || !b.matches(req) {
			continue
		}
		if b.mutating && !b.privileged && privilegedResource(req.Resource.GroupResource()) {
			continue // "*": a mutating plugin changes no privileged object unless allowed
		}
		if in == nil || mutating {
			var err error
			if in, err = abiRequest(req); err != nil {
				return apierrors.NewInternalError(err)
			}
		}
		in.Config = b.config
		if err := a.call(ctx, b, req, in, changing); err != nil {
			return err
		}
	}
	return nil
}

// call runs one binding and applies its answer to req.
func (a *Admitter) call(ctx context.Context, b *admissionBinding, req *engine.AdmissionRequest, in *abi.AdmissionRequest, changing func()) error {
	resp, err := b.caller.Admit(withDryRun(ctx, req.DryRun), in)
	if err == nil && b.mutating && resp.Allowed && req.Object != nil {
		err = mutate(req, resp, changing)
	}
	if err != nil {
		if b.ignore {
			a.log.Warn("admission plugin failed; failurePolicy Ignore lets the write through",
				"plugin", b.plugin, "resource", req.Resource.Resource, "name", req.Name, "err", err)
			warning.AddWarning(ctx, "", fmt.Sprintf("admission plugin %q failed and was ignored: %v", b.plugin, err))
			return nil
		}
		return apierrors.NewInternalError(fmt.Errorf("admission plugin %q failed (failurePolicy Fail): %w", b.plugin, err))
	}
	for _, w := range resp.Warnings {
		warning.AddWarning(ctx, "", w)
	}
	if !resp.Allowed {
		return denial(b.plugin, resp)
	}
	return nil
}

// abiRequest is the plugin's view of an admission request.
func abiRequest(req *engine.AdmissionRequest) (*abi.AdmissionRequest, error) {
	in := &abi.AdmissionRequest{
		UID:       string(uuid.NewUUID()),
		Kind:      abi.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind},
		Resource:  req.Resource.Resource,
		Namespace: req.Namespace,
		Name:      req.Name,
		Operation: abi.Operation(req.Operation),
		DryRun:    req.DryRun,
	}
	if req.User != nil {
		in.User = abi.UserInfo{Username: req.User.GetName(), UID: req.User.GetUID(), Groups: req.User.GetGroups()}
	}
	var err error
	if req.Object != nil {
		if in.Object, err = req.Object.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("encode the admitted object: %w", err)
		}
	}
	if req.OldObject != nil {
		if in.OldObject, err = req.OldObject.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("encode the stored object: %w", err)
		}
	}
	return in, nil
}

// mutate applies a mutating plugin's patch or object to req.Object, calling
// changing first when there is one to apply. The object must keep its
// identity.
func mutate(req *engine.AdmissionRequest, resp *abi.AdmissionResponse, changing func()) error {
	var doc []byte
	switch {
	case len(resp.Patch) > 0 && string(resp.Patch) != "null":
		cur, err := req.Object.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode the admitted object: %w", err)
		}
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return fmt.Errorf("the plugin's patch is not a JSON patch: %w", err)
		}
		if doc, err = p.Apply(cur); err != nil {
			return fmt.Errorf("apply the plugin's patch: %w", err)
		}
	case len(resp.Object) > 0 && string(resp.Object) != "null":
		doc = resp.Object
	default:
		return nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(doc, &m); err != nil || m == nil {
		return fmt.Errorf("the mutated object is not a JSON object")
	}
	out := &unstructured.Unstructured{Object: m}
	o := req.Object
	if out.GetAPIVersion() != o.GetAPIVersion() || out.GetKind() != o.GetKind() ||
		out.GetName() != o.GetName() || out.GetNamespace() != o.GetNamespace() {
		return fmt.Errorf("the mutation changed the object's apiVersion, kind, name or namespace")
	}
	changing()
	req.Object.Object = m
	return nil
}

// denial is the error a client gets for a plugin's denial.
func denial(plugin string, resp *abi.AdmissionResponse) error {
	code := resp.Code
	if code < 400 || code > 599 {
		code = http.StatusForbidden
	}
	msg := resp.Message
	if msg == "" {
		msg = "denied"
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(code),
		Reason:  reasonFor(code),
		Message: fmt.Sprintf("admission plugin %q denied the request: %s", plugin, msg),
	}}
}

func reasonFor(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	}
	if code >= 500 {
		return metav1.StatusReasonInternalError
	}
	return metav1.StatusReasonForbidden
}

type dryRunKey struct{}

// withDryRun marks a call made for a dry-run request, so that host
// functions with side effects (emitting events) do nothing.
func withDryRun(ctx context.Context, dry bool) context.Context {
	if !dry {
		return ctx
	}
	return context.WithValue(ctx, dryRunKey{}, true)
}

func isDryRun(ctx context.Context) bool {
	v, _ := ctx.Value(dryRunKey{}).(bool)
	return v
}
