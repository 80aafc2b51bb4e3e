package serving

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/google/uuid"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// InProcessUserAgent is the user agent of the events of writes made inside
// the server (AuditWrite), which no client sent.
const InProcessUserAgent = "setpoint/in-process"

// AuditWrite records a write made inside the server rather than through
// the API (a plugin's, as the plugin's user), under the same policy and in
// the same log as the API's requests: attrs describe it as the authorizer
// sees a request (user, verb, resource, namespace, name), body is the
// object or patch it sends (nil for none). It records RequestReceived at
// once (without the body, as over the API) and returns the function that records ResponseComplete with the
// object the write returned or its error. The events carry the request URI
// the same write would have over the API, no source IP, and
// InProcessUserAgent.
func (a *Auditor) AuditWrite(ctx context.Context, attrs authorizer.Attributes, body runtime.Object) func(out runtime.Object, err error) {
	if a == nil {
		return func(runtime.Object, error) {}
	}
	rac := a.policy.EvaluatePolicyRule(attrs)
	if rac.Level == auditinternal.LevelNone {
		return func(runtime.Object, error) {}
	}
	ev := &auditinternal.Event{
		Level:                    rac.Level,
		AuditID:                  types.UID(uuid.NewString()),
		RequestURI:               requestURI(attrs),
		Verb:                     attrs.GetVerb(),
		UserAgent:                InProcessUserAgent,
		RequestReceivedTimestamp: metav1.NewMicroTime(time.Now()),
		ObjectRef: &auditinternal.ObjectReference{
			Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(),
			Namespace: attrs.GetNamespace(), Name: attrs.GetName(),
			APIGroup: attrs.GetAPIGroup(), APIVersion: attrs.GetAPIVersion(),
		},
	}
	if u := attrs.GetUser(); u != nil {
		ev.User = authnv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: slices.Clone(u.GetGroups())}
		if extra := u.GetExtra(); len(extra) > 0 {
			ev.User.Extra = map[string]authnv1.ExtraValue{}
			for k, v := range extra {
				ev.User.Extra[k] = authnv1.ExtraValue(v)
			}
		}
	}
	fillObjectRef(ev.ObjectRef, body)
	a.stage(ev, auditinternal.StageRequestReceived, rac.OmitStages)
	return func(out runtime.Object, err error) {
		// As over the API, the request's body is in the events after
		// RequestReceived.
		if !ev.Level.Less(auditinternal.LevelRequest) && body != nil {
			ev.RequestObject = auditObject(body, rac.OmitManagedFields)
		}
		if err != nil {
			status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
				Reason: metav1.StatusReasonInternalError, Message: err.Error()}
			var st apierrors.APIStatus
			if errors.As(err, &st) {
				s := st.Status()
				status = metav1.Status{Status: s.Status, Code: s.Code, Reason: s.Reason, Message: s.Message, Details: s.Details}
			}
			ev.ResponseStatus = &status
		} else {
			code := int32(http.StatusOK)
			if attrs.GetVerb() == "create" {
				code = http.StatusCreated
			}
			ev.ResponseStatus = &metav1.Status{Code: code}
			fillObjectRef(ev.ObjectRef, out)
			if ev.Level == auditinternal.LevelRequestResponse && out != nil {
				ev.ResponseObject = auditObject(out, rac.OmitManagedFields)
			}
		}
		a.stage(ev, auditinternal.StageResponseComplete, rac.OmitStages)
	}
}

// stage records ev at stage unless the policy omits it.
func (a *Auditor) stage(ev *auditinternal.Event, stage auditinternal.Stage, omit []auditinternal.Stage) {
	if slices.Contains(omit, stage) {
		return
	}
	ev.Stage = stage
	if stage == auditinternal.StageRequestReceived {
		ev.StageTimestamp = ev.RequestReceivedTimestamp
	} else {
		ev.StageTimestamp = metav1.NewMicroTime(time.Now())
	}
	a.sink.ProcessEvents(ev)
}

// requestURI is the path of the request that would make the write attrs
// describe through the API.
func requestURI(attrs authorizer.Attributes) string {
	p := "/apis/" + attrs.GetAPIGroup()
	if attrs.GetAPIGroup() == "" {
		p = "/api"
	}
	p = path.Join(p, attrs.GetAPIVersion())
	if ns := attrs.GetNamespace(); ns != "" {
		p = path.Join(p, "namespaces", ns)
	}
	return path.Join(p, attrs.GetResource(), attrs.GetName(), attrs.GetSubresource())
}

// fillObjectRef fills what ref lacks from obj's metadata, as
// audit.LogRequestObject does.
func fillObjectRef(ref *auditinternal.ObjectReference, obj runtime.Object) {
	if obj == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if ref.Namespace == "" {
		ref.Namespace = m.GetNamespace()
	}
	if ref.Name == "" {
		ref.Name = m.GetName()
	}
	if ref.UID == "" {
		ref.UID = m.GetUID()
	}
	ref.ResourceVersion = m.GetResourceVersion()
}

// auditObject is obj as an event holds it: JSON, without managed fields
// when the policy says so.
func auditObject(obj runtime.Object, omitManagedFields bool) *runtime.Unknown {
	if u, ok := obj.(*runtime.Unknown); ok {
		return u
	}
	if omitManagedFields {
		if m, err := meta.Accessor(obj); err == nil && len(m.GetManagedFields()) > 0 {
			obj = obj.DeepCopyObject()
			m, _ := meta.Accessor(obj)
			m.SetManagedFields(nil)
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return &runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}
}
