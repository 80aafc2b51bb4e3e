package kinds

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventTopFields are the top-level fields a core/v1 Event keeps.
var eventTopFields = []string{"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp",
	"count", "type", "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance"}

// The lengths Kubernetes allows the fields of an Event that has an
// eventTime.
const (
	eventReportingInstanceLimit = 128
	eventActionLimit            = 128
	eventReasonLimit            = 128
	eventNoteLimit              = 1024
)

// newEventKind is the core/v1 Event kind: namespaced, no status, named by
// a DNS subdomain, validated as kube-apiserver validates Events written
// through core/v1 and stored as corev1.Event encodes them.
func newEventKind() *Kind {
	k := newBuiltin(EventResource, "Event", "event", true, false,
		path.ValidatePathSegmentName, validateEvent, nil, &corev1.Event{}, eventTopFields, "ev")
	k.strategy = eventStrategy{k.strategy.(builtinStrategy)}
	k.typed.encode = true
	k.table = eventTable{}
	return k
}

// eventStrategy is the strategy of core/v1 Events. kube-apiserver's
// validates only the Event's fields on create; the generic checks of
// metadata follow only when they pass, and take any name that is a path
// segment (no "/" or "%", not "." or ".."), not only a DNS subdomain. On
// update the generic checks come first, as builtinStrategy has them.
type eventStrategy struct{ builtinStrategy }

func (s eventStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	u := obj.(*unstructured.Unstructured)
	if errs := validateEvent(ctx, u, nil); len(errs) > 0 {
		return errs
	}
	return apivalidation.ValidateObjectMetaAccessor(u, s.namespaced, s.nameFn, field.NewPath("metadata"))
}

// canonicalStrategy is the built-in strategy plus an encoding: before
// each write, the object's fields other than apiVersion, kind and metadata
// are replaced by what canonical makes of them. An object canonical
// cannot take (its error) is left as it is, for validation to refuse.
type canonicalStrategy struct {
	builtinStrategy
	canonical func(body map[string]any) (map[string]any, error)
}

func (s canonicalStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.builtinStrategy.PrepareForCreate(ctx, obj)
	s.encode(obj.(*unstructured.Unstructured))
}

func (s canonicalStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.builtinStrategy.PrepareForUpdate(ctx, obj, old)
	s.encode(obj.(*unstructured.Unstructured))
}

func (s canonicalStrategy) encode(obj *unstructured.Unstructured) {
	if m, err := s.canonical(eventBody(obj.Object)); err == nil {
		setBody(obj.Object, m)
	}
}

// eventBody returns obj's fields other than apiVersion, kind and metadata.
func eventBody(obj map[string]any) map[string]any {
	body := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			body[k] = v
		}
	}
	return body
}

// validateEvent validates an Event as kube-apiserver validates one written
// through core/v1, on create and update alike (legacyValidateEvent, whose
// errors name the reporting controller reportingComponent there).
func validateEvent(_ context.Context, obj, _ *unstructured.Unstructured) field.ErrorList {
	return legacyValidateEvent(obj, "reportingComponent")
}

// legacyValidateEvent is the validation kube-apiserver gives every Event
// it writes, through either API: its namespace agrees with
// involvedObject's, and one with an eventTime (a new-style Event) names
// its reporting controller and instance, action and reason, within
// Kubernetes' lengths. controllerField is the name the errors give the
// reporting controller: the field's name in the API the request came
// through (reportingComponent in core/v1, reportingController in
// events.k8s.io/v1), as kube-apiserver names it. obj's fields have
// corev1.Event's types by now (Coerce refuses an object that does not
// decode into it), so they are read as they are: a typed decode here cost
// every Event write, the controllers' included, 5% of a converge's CPU
// (37 µs per object in a profile of BenchmarkReconcile).
func legacyValidateEvent(obj *unstructured.Unstructured, controllerField string) field.ErrorList {
	var errs field.ErrorList
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(obj.Object, fields...)
		return v
	}
	ns := obj.GetNamespace()
	involvedNS := field.NewPath("involvedObject", "namespace")
	involved := str("involvedObject", "namespace")
	if str("eventTime") == "" {
		// An Event about a cluster-scoped object is in no namespace, or
		// in default for older clients.
		if involved == "" {
			if ns != metav1.NamespaceNone && ns != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(involvedNS, involved, "does not match event.namespace"))
			}
		} else if ns != involved {
			errs = append(errs, field.Invalid(involvedNS, involved, "does not match event.namespace"))
		}
	} else {
		if involved == "" && ns != metav1.NamespaceDefault && ns != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(involvedNS, involved, "does not match event.namespace"))
		}
		controller := field.NewPath(controllerField)
		reportingController := str("reportingComponent")
		if reportingController == "" {
			errs = append(errs, field.Required(controller, ""))
		}
		for _, msg := range validation.IsQualifiedName(reportingController) {
			errs = append(errs, field.Invalid(controller, reportingController, msg))
		}
		errs = append(errs, requiredWithin(field.NewPath("reportingInstance"), str("reportingInstance"), eventReportingInstanceLimit)...)
		errs = append(errs, requiredWithin(field.NewPath("action"), str("action"), eventActionLimit)...)
		errs = append(errs, requiredWithin(field.NewPath("reason"), str("reason"), eventReasonLimit)...)
		if len(str("message")) > eventNoteLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", eventNoteLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ns) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ns, msg))
	}
	return errs
}

// requiredWithin refuses an empty value, or one longer than limit bytes.
func requiredWithin(path *field.Path, v string, limit int) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if len(v) > limit {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("can have at most %v characters", limit))}
	}
	return nil
}

// BuiltEvent encodes e as the Event kind stores it, corev1.Event's
// encoding with its apiVersion and kind, the shape a write marked
// WithBuiltShape promises; metadata holds e's name and namespace only (the
// server sets the rest on create).
func BuiltEvent(e *corev1.Event) (*unstructured.Unstructured, error) {
	c := *e // metadata apart: ObjectMeta encodes a null creationTimestamp
	c.ObjectMeta = metav1.ObjectMeta{}
	body, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return nil, fmt.Errorf("encode the Event: %w", err)
	}
	body["apiVersion"], body["kind"] = "v1", "Event"
	body["metadata"] = map[string]any{"name": e.Name, "namespace": e.Namespace}
	return &unstructured.Unstructured{Object: body}, nil
}
