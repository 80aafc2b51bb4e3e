package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Objects serves the host functions get, list, emit_event and the writes
// (create, update, patch, delete) over the engine's object service. The host
// checks a plugin's permissions before it calls them.
type Objects struct {
	svc *engine.Service
	log *slog.Logger
	// events aggregates the Events plugins emit again, as Kubernetes'
	// event recorders do: same plugin, object, type, reason and message
	// within the controller's aggregation window add to the count and move
	// the lastTimestamp of the Event recorded before instead of adding one
	// (see RecordEvent).
	events *controller.EventAggregator
	// writes rate-limits the plugins' writes; nil limits nothing.
	writes *WriteLimiter
	// audit records the plugins' writes; nil records nothing.
	audit Auditor
	// authz decides every access a plugin makes; nil allows what the
	// host's check of the spec lets through.
	authz authorizer.Authorizer
}

// Authorize has a decide each of the plugins' host-call reads and writes,
// events included, as the plugin's user (see authorize). Call it before
// the host serves calls.
func (o *Objects) Authorize(a authorizer.Authorizer) { o.authz = a }

// AuditWrites has a record the plugins' host-call writes and events in the
// audit log. Call it before the host serves calls.
func (o *Objects) AuditWrites(a Auditor) { o.audit = a }

// LimitWrites has w rate-limit the plugins' host-call creates, updates and
// patches; a write over the limit is answered 429 TooManyRequests. Call it
// before the host serves calls.
func (o *Objects) LimitWrites(w *WriteLimiter) { o.writes = w }

// NewObjects returns the host-function adapters over svc.
func NewObjects(svc *engine.Service, log *slog.Logger) *Objects {
	if log == nil {
		log = slog.Default()
	}
	return &Objects{svc: svc, log: log, events: controller.NewEventAggregator()}
}

func (o *Objects) resource(apiVersion, kind string) (kinds.Resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return kinds.Resource{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	r, ok := o.svc.ResourceForKind(gv.WithKind(kind))
	if !ok {
		return kinds.Resource{}, fmt.Errorf("%w: kind %s of %s", ErrNotServed, kind, apiVersion)
	}
	return r, nil
}

// GetObject returns one object, read as plugin; found is false when it
// does not exist.
func (o *Objects) GetObject(ctx context.Context, plugin string, req abi.GetRequest) ([]byte, bool, error) {
	r, err := o.resource(req.APIVersion, req.Kind)
	if err != nil {
		return nil, false, err
	}
	ns := req.Namespace
	if !r.Namespaced {
		ns = ""
	}
	if err := authorize(ctx, o.authz, plugin, accessOf("get", r.GVR, "", ns, req.Name)); err != nil {
		return nil, false, err
	}
	obj, err := o.svc.Get(ctx, r.GVR, ns, req.Name, metav1.GetOptions{})
	if err != nil {
		if isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	b, err := obj.MarshalJSON()
	return b, err == nil, err
}

// ListObjects returns the objects of a kind that match the request, listed
// as plugin.
func (o *Objects) ListObjects(ctx context.Context, plugin string, req abi.ListRequest) ([][]byte, error) {
	r, err := o.resource(req.APIVersion, req.Kind)
	if err != nil {
		return nil, err
	}
	ns := req.Namespace
	if !r.Namespaced {
		ns = ""
	}
	if err := authorize(ctx, o.authz, plugin, accessOf("list", r.GVR, "", ns, "")); err != nil {
		return nil, err
	}
	list, err := o.svc.List(ctx, r.GVR, ns, metav1.ListOptions{LabelSelector: req.LabelSelector, Limit: int64(req.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(list.Items))
	for i := range list.Items {
		b, err := list.Items[i].MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// RecordEvent records a plugin's event as a core/v1 Event about regarding.
// In a call for a dry-run request it only logs.
func (o *Objects) RecordEvent(ctx context.Context, plugin string, regarding abi.ObjectRef, ev abi.Event) error {
	ctx = request.WithUser(ctx, PluginUser(plugin))
	if isDryRun(ctx) {
		o.log.Info("plugin event dropped (dry run)", "plugin", plugin, "reason", ev.Reason, "name", regarding.Name)
		return nil
	}
	ns := regarding.Namespace
	if ns == "" {
		ns = kinds.DefaultNamespace
	}
	typ := ev.Type
	if typ != corev1.EventTypeWarning {
		typ = corev1.EventTypeNormal
	}
	now := metav1.Now()
	key := strings.Join([]string{plugin, regarding.UID, ns, regarding.Kind, regarding.Name, typ, ev.Reason, ev.Message}, "\x00")
	// The Event is built here in the shape the Event kind stores
	// (pluginEvent), and counted on as stored: the engine skips decoding
	// it again, as it does the controllers' Events.
	ctx = kinds.WithBuiltShape(ctx)
	w := auditClient(o.audit, authorizeClient(o.authz, plugin, o.svc))
	bumped, err := o.events.Bump(ctx, w, key, now.UTC().Format(time.RFC3339))
	if bumped {
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("plugins: record event: %w", err)
	}
	// None recent, or deleted or counted by a concurrent call meanwhile:
	// record anew.
	u, err := pluginEvent(plugin, ns, regarding, typ, ev, now)
	if err != nil {
		return err
	}
	stored, err := w.Create(ctx, kinds.EventResource, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("plugins: record event: %w", err)
	}
	o.events.Add(key, stored)
	return nil
}

// pluginEvent returns the core/v1 Event plugin's event ev about regarding
// is recorded as, in namespace ns, encoded as corev1.Event encodes it.
func pluginEvent(plugin, ns string, regarding abi.ObjectRef, typ string, ev abi.Event, now metav1.Time) (*unstructured.Unstructured, error) {
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      strings.ToLower(regarding.Name + "." + rand.String(10)),
			Namespace: ns,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: regarding.APIVersion, Kind: regarding.Kind,
			Namespace: regarding.Namespace, Name: regarding.Name, UID: typesUID(regarding.UID),
		},
		Type: typ, Reason: ev.Reason, Message: ev.Message,
		Source:         corev1.EventSource{Component: "plugin/" + plugin},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		// As client-go's event recorders report it: the source's
		// component.
		ReportingController: "plugin/" + plugin,
	}
	u, err := kinds.BuiltEvent(e)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	return u, nil
}

func typesUID(s string) types.UID { return types.UID(s) }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// WriteObject serves the write host functions. A write goes through the
// engine's object service like a client's (defaulting, schema validation,
// mutating and validating admission, plugins' included, then the store), made
// by the user PluginUser(plugin) with the field manager "plugin:NAME". A
// namespaced object without a namespace goes to the default namespace. A
// failure comes back with its Kubernetes reason and code.
func (o *Objects) WriteObject(ctx context.Context, plugin, fn string, req abi.WriteRequest) abi.WriteResponse {
	ctx = request.WithUser(ctx, PluginUser(plugin))
	if fn != abi.HostDelete {
		// Deletes pass: they are how a plugin over its limit cleans up.
		if err := o.writes.allow(plugin, sourceHostCall); err != nil {
			resp := writeError(ctx, err)
			o.log.DebugContext(ctx, "plugin write throttled", "plugin", plugin, "op", fn)
			return resp
		}
	}
	obj, ref, err := o.write(ctx, plugin, fn, req)
	if err != nil {
		resp := writeError(ctx, err)
		o.log.DebugContext(ctx, "plugin write failed", "plugin", plugin, "op", fn, "kind", ref.Kind,
			"namespace", ref.Namespace, "name", ref.Name, "reason", resp.Reason, "error", resp.Error)
		return resp
	}
	o.log.DebugContext(ctx, "plugin write", "plugin", plugin, "op", fn, "kind", ref.Kind,
		"namespace", ref.Namespace, "name", ref.Name, "rev", obj.GetResourceVersion())
	b, err := obj.MarshalJSON()
	if err != nil {
		return writeError(ctx, err)
	}
	return abi.WriteResponse{Object: b}
}

func (o *Objects) write(ctx context.Context, plugin, fn string, req abi.WriteRequest) (*unstructured.Unstructured, abi.ObjectRef, error) {
	manager := fieldManager(plugin)
	ref := abi.ObjectRef{APIVersion: req.APIVersion, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name}
	var u *unstructured.Unstructured
	if fn == abi.HostCreate || fn == abi.HostUpdate {
		u = &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(req.Object); err != nil {
			return nil, ref, apierrors.NewBadRequest(fmt.Sprintf("%s: the object is not valid: %v", fn, err))
		}
		ref = abi.ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	}
	r, err := o.resource(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, ref, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404, Message: err.Error()}}
	}
	switch {
	case !r.Namespaced:
		ref.Namespace = ""
	case ref.Namespace == "":
		ref.Namespace = kinds.DefaultNamespace
	}
	if u != nil {
		u.SetNamespace(ref.Namespace)
	}
	switch fn {
	case abi.HostCreate:
		done := auditWrite(ctx, o.audit, "create", r.GVR, ref.Namespace, "", "", u)
		if err := o.authorizeWrite(ctx, plugin, "create", r.GVR, "", ref.Namespace, "", done); err != nil {
			return nil, ref, err
		}
		if err := o.writes.quota().admit(ctx, plugin, sourceHostCall, r.GVR.GroupResource(), u); err != nil {
			done(nil, err)
			return nil, ref, err
		}
		out, err := o.svc.Create(ctx, r.GVR, u, metav1.CreateOptions{FieldManager: manager})
		done(out, err)
		return out, ref, err
	case abi.HostUpdate:
		opts := metav1.UpdateOptions{FieldManager: manager}
		if req.Subresource == "status" {
			done := auditWrite(ctx, o.audit, "update", r.GVR, ref.Namespace, ref.Name, "status", u)
			if err := o.authorizeWrite(ctx, plugin, "update", r.GVR, "status", ref.Namespace, ref.Name, done); err != nil {
				return nil, ref, err
			}
			out, err := o.svc.UpdateStatus(ctx, r.GVR, u, opts)
			done(out, err)
			return out, ref, err
		}
		done := auditWrite(ctx, o.audit, "update", r.GVR, ref.Namespace, ref.Name, "", u)
		if err := o.authorizeWrite(ctx, plugin, "update", r.GVR, "", ref.Namespace, ref.Name, done); err != nil {
			return nil, ref, err
		}
		out, err := o.svc.Update(ctx, r.GVR, u, opts)
		done(out, err)
		return out, ref, err
	case abi.HostPatch:
		var subs []string
		if req.Subresource != "" {
			subs = []string{req.Subresource}
		}
		done := auditWrite(ctx, o.audit, "patch", r.GVR, ref.Namespace, ref.Name, req.Subresource,
			&runtime.Unknown{Raw: req.Patch, ContentType: runtime.ContentTypeJSON})
		if err := o.authorizeWrite(ctx, plugin, "patch", r.GVR, req.Subresource, ref.Namespace, ref.Name, done); err != nil {
			return nil, ref, err
		}
		out, err := o.svc.Patch(ctx, r.GVR, ref.Namespace, ref.Name, types.MergePatchType, req.Patch,
			metav1.PatchOptions{FieldManager: manager}, subs...)
		done(out, err)
		return out, ref, err
	case abi.HostDelete:
		var opts metav1.DeleteOptions
		if req.UID != "" || req.ResourceVersion != "" {
			opts.Preconditions = &metav1.Preconditions{}
			if req.UID != "" {
				uid := typesUID(req.UID)
				opts.Preconditions.UID = &uid
			}
			if req.ResourceVersion != "" {
				opts.Preconditions.ResourceVersion = &req.ResourceVersion
			}
		}
		done := auditWrite(ctx, o.audit, "delete", r.GVR, ref.Namespace, ref.Name, "", deleteOptions(opts))
		if err := o.authorizeWrite(ctx, plugin, "delete", r.GVR, "", ref.Namespace, ref.Name, done); err != nil {
			return nil, ref, err
		}
		out, _, err := o.svc.DeleteObject(ctx, r.GVR, ref.Namespace, ref.Name, opts)
		done(out, err)
		return out, ref, err
	}
	return nil, ref, apierrors.NewBadRequest(fn + " is not a write")
}

// authorizeWrite authorizes a write of plugin; a denial is recorded by
// done, the write's audit, as the write's outcome.
func (o *Objects) authorizeWrite(ctx context.Context, plugin, verb string, gvr schema.GroupVersionResource, sub, ns, name string,
	done func(*unstructured.Unstructured, error)) error {
	err := authorize(ctx, o.authz, plugin, accessOf(verb, gvr, sub, ns, name))
	if err != nil {
		done(nil, err)
	}
	return err
}

// writeError is the answer to a failed write: the status of an API error,
// Timeout for a call past its deadline, InternalError otherwise.
func writeError(ctx context.Context, err error) abi.WriteResponse {
	var st apierrors.APIStatus
	switch {
	case errors.As(err, &st):
		s := st.Status()
		return abi.WriteResponse{Error: s.Message, Reason: string(s.Reason), Code: int(s.Code)}
	case ctx.Err() != nil:
		return abi.WriteResponse{Error: err.Error(), Reason: string(metav1.StatusReasonTimeout), Code: 504}
	}
	return abi.WriteResponse{Error: err.Error(), Reason: string(metav1.StatusReasonInternalError), Code: 500}
}
