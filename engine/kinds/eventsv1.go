package kinds

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EventsV1Resource is events.k8s.io/v1 Events: the same stored Events as
// core/v1's, served with events.k8s.io/v1's fields.
var EventsV1Resource = eventsv1.SchemeGroupVersion.WithResource("events")

// eventsV1TopFields are the top-level fields an events.k8s.io/v1 Event
// keeps.
var eventsV1TopFields = []string{"eventTime", "series", "reportingController", "reportingInstance", "action", "reason",
	"regarding", "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
	"deprecatedCount"}

// storedView makes a Kind a second view of objects another kind stores:
// its objects are read from and written to that kind's keys, converted
// from and to the stored kind's form.
type storedView struct {
	// gvr is the stored kind's resource, at its (only) version.
	gvr schema.GroupVersionResource
	// fromStored converts a stored document's map, the stored kind's
	// object, into the view's object; toStored the other way.
	fromStored func(map[string]any) (map[string]any, error)
	toStored   func(map[string]any) (map[string]any, error)
}

// StoredGroupResource is the group/resource under whose keys k's objects
// are stored: k's own, or that of the kind k is a view of.
func (k *Kind) StoredGroupResource() schema.GroupResource {
	if k.view != nil {
		return k.view.gvr.GroupResource()
	}
	return k.GVR.GroupResource()
}

// newEventsV1Kind is the events.k8s.io/v1 Event kind: a view of the
// core/v1 Events, converted field by field as Kubernetes converts between
// the two versions, and validated on writes through it as kube-apiserver
// validates writes through events.k8s.io/v1 (strictly, beyond core/v1's
// rules).
func newEventsV1Kind() *Kind {
	k := newBuiltin(EventsV1Resource, "Event", "event", true, false,
		apivalidation.NameIsDNSSubdomain, nil, nil, &eventsv1.Event{}, eventsV1TopFields, "ev")
	k.strategy = eventsV1Strategy{canonicalStrategy{k.strategy.(builtinStrategy), canonicalEventsV1}}
	k.table = eventsV1Table{}
	k.StoredAs = EventResource.GroupVersion()
	k.view = &storedView{gvr: EventResource,
		fromStored: convertBody(coreEventToV1, EventsV1Resource.GroupVersion().String()),
		toStored:   convertBody(v1EventToCore, EventResource.GroupVersion().String())}
	return k
}

// convertBody returns a conversion of objects that converts their fields
// other than apiVersion, kind and metadata with conv, keeps their metadata
// as it is and sets apiVersion to apiVersion.
func convertBody(conv func(map[string]any) (map[string]any, error), apiVersion string) func(map[string]any) (map[string]any, error) {
	return func(m map[string]any) (map[string]any, error) {
		out, err := conv(eventBody(m))
		if err != nil {
			return nil, err
		}
		delete(out, "metadata")
		if md, ok := m["metadata"]; ok {
			out["metadata"] = md
		}
		out["apiVersion"] = apiVersion
		out["kind"] = "Event"
		return out, nil
	}
}

// coreEventToV1 converts a core/v1 Event's map into an events.k8s.io/v1
// Event's, as Kubernetes converts through its internal Event: involvedObject
// is regarding, message note, source deprecatedSource, firstTimestamp,
// lastTimestamp and count deprecatedFirstTimestamp, deprecatedLastTimestamp
// and deprecatedCount; the other fields keep their names.
func coreEventToV1(m map[string]any) (map[string]any, error) {
	var in corev1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &in); err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(coreToV1Event(&in))
}

// coreToV1Event converts a core/v1 Event into an events.k8s.io/v1 Event,
// field by field as coreEventToV1 says.
func coreToV1Event(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:                 in.TypeMeta,
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.APIVersion = EventsV1Resource.GroupVersion().String()
	return out
}

// v1EventToCore is coreEventToV1 the other way.
func v1EventToCore(m map[string]any) (map[string]any, error) {
	in, err := decodeEventsV1(m)
	if err != nil {
		return nil, err
	}
	out := v1ToCoreEvent(in)
	out.APIVersion = EventResource.GroupVersion().String()
	return runtime.DefaultUnstructuredConverter.ToUnstructured(out)
}

func decodeEventsV1(m map[string]any) (*eventsv1.Event, error) {
	var in eventsv1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func v1ToCoreEvent(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:            in.TypeMeta,
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// eventsV1Strategy is the built-in strategy plus the encoding and the
// validation of events.k8s.io/v1 Events.
type eventsV1Strategy struct{ canonicalStrategy }

// canonicalEventsV1 returns an events.k8s.io/v1 Event's fields as
// kube-apiserver serves them: converted to core/v1 and back, as Kubernetes
// stores and reads the object. The conversions are of the typed Events:
// the map is decoded and encoded once.
func canonicalEventsV1(body map[string]any) (map[string]any, error) {
	in, err := decodeEventsV1(body)
	if err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(coreToV1Event(v1ToCoreEvent(in)))
}

// Validate validates an Event created through events.k8s.io/v1 as
// kube-apiserver does: the legacy rules, then its metadata, then the
// rules of events.k8s.io/v1.
func (s eventsV1Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	u := obj.(*unstructured.Unstructured)
	meta := apivalidation.ValidateObjectMetaAccessor(u, s.namespaced, s.nameFn, field.NewPath("metadata"))
	return validateEventsV1(u, nil, meta)
}

// ValidateUpdate validates an update through events.k8s.io/v1 as
// kube-apiserver does: its generic checks take any name that is a path
// segment, as for every kind (a core/v1 Event may have one), and the
// DNS subdomain rule holds on create only.
func (s eventsV1Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b := s.builtinStrategy
	b.nameFn = path.ValidatePathSegmentName
	errs := b.ValidateUpdate(ctx, obj, old)
	return append(errs, validateEventsV1(obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured), nil)...)
}

// validateEventsV1 validates an Event written through events.k8s.io/v1 as
// kube-apiserver does: the rules of core/v1 Events (validateEvent), then,
// on create, an eventTime, a type of Normal or Warning, a series of at
// least 2 with a lastObservedTime, and none of the deprecated fields; on
// update, a valid series if it changed, and every field but the series
// unchanged. Paths name the fields as Kubernetes' internal Event does.
// meta, the errors of the Event's metadata, follow the legacy rules'.
func validateEventsV1(obj, old *unstructured.Unstructured, meta field.ErrorList) field.ErrorList {
	for _, f := range eventsV1TopFields {
		v, ok := obj.Object[f]
		if !ok {
			continue
		}
		var ev eventsv1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{f: v}, &ev); err != nil {
			return append(meta, field.Invalid(field.NewPath(f), v, err.Error()))
		}
	}
	in, err := decodeEventsV1(eventBody(obj.Object))
	if err != nil {
		return append(meta, field.Invalid(field.NewPath(""), nil, err.Error()))
	}
	ev := v1ToCoreEvent(in)
	ev.Namespace = obj.GetNamespace()
	coreMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return append(meta, field.Invalid(field.NewPath(""), nil, err.Error()))
	}
	errs := legacyValidateEvent(&unstructured.Unstructured{Object: coreMap}, "reportingController")
	errs = append(errs, meta...)
	if old == nil {
		errs = append(errs, validateEventSeries(ev)...)
		if ev.EventTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
		}
		if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
			errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
		}
		if !ev.FirstTimestamp.IsZero() {
			errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
		}
		if !ev.LastTimestamp.IsZero() {
			errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
		}
		if ev.Count != 0 {
			errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
		}
		if ev.Source.Component != "" || ev.Source.Host != "" {
			errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
		}
		return errs
	}
	oldIn, err := decodeEventsV1(eventBody(old.Object))
	if err != nil {
		return append(errs, field.Invalid(field.NewPath(""), nil, err.Error()))
	}
	o := v1ToCoreEvent(oldIn)
	if !reflect.DeepEqual(ev.Series, o.Series) {
		errs = append(errs, validateEventSeries(ev)...)
	}
	for _, c := range []struct {
		path     string
		new, old any
	}{
		{"involvedObject", ev.InvolvedObject, o.InvolvedObject},
		{"reason", ev.Reason, o.Reason},
		{"message", ev.Message, o.Message},
		{"source", ev.Source, o.Source},
		{"firstTimestamp", ev.FirstTimestamp, o.FirstTimestamp},
		{"lastTimestamp", ev.LastTimestamp, o.LastTimestamp},
		{"count", ev.Count, o.Count},
		{"type", ev.Type, o.Type},
		{"eventTime", ev.EventTime, o.EventTime},
		{"action", ev.Action, o.Action},
		{"related", ev.Related, o.Related},
		{"reportingController", ev.ReportingController, o.ReportingController},
		{"reportingInstance", ev.ReportingInstance, o.ReportingInstance},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(c.new, c.old, field.NewPath(c.path))...)
	}
	return errs
}

// validateEventSeries refuses a series of fewer than 2 occurrences or
// without a lastObservedTime.
func validateEventSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

// eventsV1Table is the table of events.k8s.io/v1 Events: kube-apiserver's
// Event columns (eventTable), of the Events converted to core/v1, each row
// holding the events.k8s.io/v1 object.
type eventsV1Table struct{ eventTable }

// ConvertToTable implements rest.TableConvertor for an events.k8s.io/v1
// Event or a list of them.
func (t eventsV1Table) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	var items []runtime.Object
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, err
		}
	} else {
		items = []runtime.Object{obj}
	}
	core := &unstructured.UnstructuredList{Object: map[string]any{}}
	if m, err := meta.ListAccessor(obj); err == nil && meta.IsListType(obj) {
		core.SetResourceVersion(m.GetResourceVersion())
		core.SetContinue(m.GetContinue())
		core.SetRemainingItemCount(m.GetRemainingItemCount())
	}
	for _, item := range items {
		u, ok := item.(runtime.Unstructured)
		if !ok {
			return nil, fmt.Errorf("event table: unexpected %T", item)
		}
		m, err := v1EventToCore(u.UnstructuredContent())
		if err != nil {
			return nil, fmt.Errorf("event table: %w", err)
		}
		core.Items = append(core.Items, unstructured.Unstructured{Object: m})
	}
	var in runtime.Object = core
	if !meta.IsListType(obj) {
		in = &core.Items[0]
	}
	table, err := t.eventTable.ConvertToTable(ctx, in, opts)
	if err != nil {
		return nil, err
	}
	for i := range table.Rows {
		table.Rows[i].Object = runtime.RawExtension{Object: items[i]}
	}
	return table, nil
}

// FromStored converts m, a stored document's map, into the object served
// at k's version: itself, unless k is a view of another kind's objects.
func (k *Kind) FromStored(m map[string]any) (map[string]any, error) {
	if k.view == nil {
		return m, nil
	}
	return k.view.fromStored(m)
}

// eventsV1Fields are the field selectors events.k8s.io/v1 Events take
// besides metadata ones, as kube-apiserver converts their labels.
var eventsV1Fields = map[string][]string{
	"regarding.kind":            {"regarding", "kind"},
	"regarding.namespace":       {"regarding", "namespace"},
	"regarding.name":            {"regarding", "name"},
	"regarding.uid":             {"regarding", "uid"},
	"regarding.apiVersion":      {"regarding", "apiVersion"},
	"regarding.resourceVersion": {"regarding", "resourceVersion"},
	"regarding.fieldPath":       {"regarding", "fieldPath"},
	"reason":                    {"reason"},
	"reportingController":       {"reportingController"},
	"type":                      {"type"},
}
