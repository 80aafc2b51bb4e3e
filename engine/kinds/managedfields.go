package kinds

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldManagers are the field managers of one kind at one version: the
// library's (k8s.io/apimachinery/pkg/util/managedfields) FieldManager for
// the resource and one for its status subresource. They record
// metadata.managedFields on every write and merge server-side apply
// requests; they hold no per-object state, so one serves every object of
// the kind.
type fieldManagers struct {
	main   *managedfields.FieldManager
	status *managedfields.FieldManager // nil without a status subresource
	// scale records writes through the scale subresource, as
	// kube-apiserver does: Updates with the subresource "scale", of the
	// object's own fields (spec's replicas). nil without the subresource.
	scale *managedfields.FieldManager
	// finalize records writes through a namespace's finalize subresource,
	// as kube-apiserver does: Updates with the subresource "finalize",
	// which own everything but status. nil for other kinds.
	finalize *managedfields.FieldManager
	// tc is the type converter they were built with; applyTo types the
	// applied configuration with it to tell the client's errors from the
	// server's.
	tc managedfields.TypeConverter
	// builtin is the typing of a built-in kind's objects (tc's schema);
	// nil for custom resources and for kinds typed by deduction.
	builtin *builtinTypes
}

// forSub returns the field manager of the subresource sub ("", "status",
// "scale" or "finalize").
func (m *fieldManagers) forSub(sub string) *managedfields.FieldManager {
	if m == nil {
		return nil
	}
	switch sub {
	case "status":
		return m.status
	case "scale":
		return m.scale
	case "finalize":
		return m.finalize
	}
	return m.main
}

// FieldManager returns the library's field manager of the kind's
// subresource sub ("", "status", "scale" or "finalize"); nil when the kind has none.
func (k *Kind) FieldManager(sub string) *managedfields.FieldManager {
	return managedFor(k).forSub(sub)
}

// TypeConverter is the type converter of the kind's field managers: what
// types an applied configuration (to tell the client's errors from the
// server's). Nil when the kind has no field managers.
func (k *Kind) TypeConverter() managedfields.TypeConverter {
	if m := managedFor(k); m != nil {
		return m.tc
	}
	return nil
}

// resetFieldsGetter is what the custom resource strategies tell the field
// manager: the fields a write of the resource (or of its status) resets.
type resetFieldsGetter interface {
	GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set
}

// newFieldManagers builds the field managers of sv's kind with the type
// converter tc, as kube-apiserver builds those of a CRD version: the CRD
// flavour of the library's field manager (objects are unstructured), the
// version itself as hub, and the strategies' reset fields so that the
// resource does not own status and the status subresource owns nothing
// else.
func newFieldManagers(sv *Kind, tc managedfields.TypeConverter, conv runtime.ObjectConvertor, def runtime.ObjectDefaulter) (*fieldManagers, error) {
	gvk := sv.GVK()
	reset := func(st Strategy, fallback ...string) map[fieldpath.APIVersion]fieldpath.Filter {
		if g, ok := st.(resetFieldsGetter); ok {
			return fieldpath.NewExcludeFilterSetMap(g.GetResetFields())
		}
		set := fieldpath.NewSet()
		for _, f := range fallback {
			set.Insert(fieldpath.MakePathOrDie(f))
		}
		return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
			fieldpath.APIVersion(gvk.GroupVersion().String()): set,
		})
	}
	var mainReset []string
	if sv.Status {
		mainReset = []string{"status"}
	}
	m := &fieldManagers{tc: tc}
	var err error
	m.main, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, unstructuredCreater{}, gvk, gvk.GroupVersion(), "", reset(sv.strategy, mainReset...))
	if err != nil {
		return nil, err
	}
	if sv.Status {
		m.status, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, unstructuredCreater{}, gvk, gvk.GroupVersion(), "status", reset(sv.statusStrategy, "spec", "metadata"))
		if err != nil {
			return nil, err
		}
	}
	if sv.Scale {
		// A write through /scale changes the object as an update of the
		// resource does (the strategy of the resource resets its fields).
		m.scale, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, unstructuredCreater{}, gvk, gvk.GroupVersion(), "scale", reset(sv.strategy, mainReset...))
		if err != nil {
			return nil, err
		}
	}
	if sv.Builtin && sv.GVR == NamespaceResource {
		m.finalize, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, unstructuredCreater{}, gvk, gvk.GroupVersion(), "finalize", reset(nil, "status"))
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// crdFieldManagers builds the field managers of every served version of
// crd (ss, as BuildCRD made them), with one type converter made from the
// OpenAPI v3 schemas of all its versions, as kube-apiserver's crdHandler
// does. A CRD whose schemas cannot be turned into one gets the deduced type
// converter, as there too.
//
// Every write of a CRD serves it again (status-only ones included: its
// conditions, the collector's Terminating), and building the type
// converter is most of the cost of that (1.35 of 3.4 ms for the Widget
// CRD). The field managers depend only on what crdFieldManagersKey hashes,
// so the registry keeps them per CRD name with that hash and reuses them
// while it is the same.
func (r *Registry) crdFieldManagers(crd *apiextensionsv1.CustomResourceDefinition, ss []*Kind) error {
	key, keyErr := crdFieldManagersKey(crd, ss)
	if c, ok := r.fieldManagers.Load(crd.Name); ok && keyErr == nil {
		if c := c.(*crdFieldManagersEntry); c.key == key && reuseFieldManagers(c, ss) {
			return nil
		}
	}
	tc, err := crdTypeConverter(crd)
	if err != nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	// Every version the CRD lists converts, served or not, as with
	// kube-apiserver's converter: managedFields recorded at a version that
	// has stopped being served must still be read.
	conv := relabelConverter{versions: map[schema.GroupVersion]bool{}}
	for _, v := range crd.Spec.Versions {
		conv.versions[schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}] = true
	}
	def := structuralDefaulter{}
	for _, sv := range ss {
		def[sv.GVR.GroupVersion()] = sv.defaults // defaultingSchema of sv.structural
	}
	entry := &crdFieldManagersEntry{key: key, byVersion: map[string]*fieldManagers{}}
	for _, sv := range ss {
		m, err := newFieldManagers(sv, tc, conv, def)
		if err != nil {
			return fmt.Errorf("crd %s version %s: field manager: %w", crd.Name, sv.GVR.Version, err)
		}
		sv.managed = m
		entry.byVersion[sv.GVR.Version] = m
	}
	if keyErr == nil {
		r.fieldManagers.Store(crd.Name, entry)
	}
	return nil
}

type crdFieldManagersEntry struct {
	key       [sha256.Size]byte
	byVersion map[string]*fieldManagers
}

// reuseFieldManagers gives each of ss the field managers of its version in
// c, and reports whether c had them all.
func reuseFieldManagers(c *crdFieldManagersEntry, ss []*Kind) bool {
	for _, sv := range ss {
		if c.byVersion[sv.GVR.Version] == nil {
			return false
		}
	}
	for _, sv := range ss {
		sv.managed = c.byVersion[sv.GVR.Version]
	}
	return true
}

// crdFieldManagersKey hashes what a CRD's field managers are built from:
// its group and kind, preserveUnknownFields, and each version's name,
// whether it is served, its schema and its subresources (the status
// subresource decides the reset fields). Printer columns, deprecation,
// selectable fields, labels and status are left out.
func crdFieldManagersKey(crd *apiextensionsv1.CustomResourceDefinition, ss []*Kind) ([sha256.Size]byte, error) {
	type version struct {
		Name         string                                      `json:"name"`
		Served       bool                                        `json:"served"`
		Schema       *apiextensionsv1.CustomResourceValidation   `json:"schema,omitempty"`
		Subresources *apiextensionsv1.CustomResourceSubresources `json:"subresources,omitempty"`
	}
	in := struct {
		Group                 string    `json:"group"`
		Kinds                 []string  `json:"kinds"`
		PreserveUnknownFields bool      `json:"preserveUnknownFields"`
		Versions              []version `json:"versions"`
	}{Group: crd.Spec.Group, PreserveUnknownFields: crd.Spec.PreserveUnknownFields}
	for _, sv := range ss {
		in.Kinds = append(in.Kinds, sv.GVK().String())
	}
	for _, v := range crd.Spec.Versions {
		in.Versions = append(in.Versions, version{Name: v.Name, Served: v.Served, Schema: v.Schema, Subresources: v.Subresources})
	}
	b, err := json.Marshal(in)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// crdTypeConverter returns the structured-merge-diff type converter of
// crd's objects, from the schemas the apiextensions OpenAPI builder makes
// (which carry the meta/v1 definitions they refer to).
func crdTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		o, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, err
		}
		specs = append(specs, o)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	if merged.Components == nil || len(merged.Components.Schemas) == 0 {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
}

// managedFor returns the field managers of sv, nil when it has none. Those
// of a built-in kind are made on first use, with the type converter of its
// Kubernetes API type (builtintypes.go); a kind the API has no schema for
// gets the deduced one (maps merge key by key, lists are atomic).
func managedFor(sv *Kind) *fieldManagers {
	if !sv.Builtin {
		return sv.managed
	}
	sv.builtinManaged.Do(func() {
		var tc managedfields.TypeConverter = managedfields.NewDeducedTypeConverter()
		types, typed := newBuiltinTypes(sv)
		if typed {
			tc = types.tc
		}
		m, err := newFieldManagers(sv, tc,
			relabelConverter{versions: map[schema.GroupVersion]bool{sv.GVR.GroupVersion(): true}}, structuralDefaulter{})
		if err == nil {
			if typed {
				m.builtin = &types
			}
			sv.managed = m
		}
	})
	return sv.managed
}

// relabelConverter converts an unstructured object between the versions of
// a kind by relabelling its apiVersion, which is all the engine's versions
// differ by (as with a CRD's None conversion strategy). A version it does
// not have gives runtime's not-registered error, which structured-merge-diff
// takes for a version that no longer exists: it drops the managedFields
// entries recorded at it.
type relabelConverter struct {
	versions map[schema.GroupVersion]bool
}

var _ runtime.ObjectConvertor = relabelConverter{}

func (c relabelConverter) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("kinds: cannot convert %T to %T", in, out)
	}
	o.Object = u.DeepCopy().Object
	return nil
}

func (c relabelConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("kinds: cannot convert %T", in)
	}
	from := u.GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok || !c.versions[to.GroupVersion()] {
		return nil, runtime.NewNotRegisteredErrForTarget("setpoint", reflect.TypeOf(in), target)
	}
	if to == from {
		return u, nil
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(to)
	return out, nil
}

func (c relabelConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// structuralDefaulter applies the defaults of each version's structural
// schema, as the custom resource decoder does.
type structuralDefaulter map[schema.GroupVersion]*structuralschema.Structural

func (d structuralDefaulter) Default(in runtime.Object) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if s := d[u.GroupVersionKind().GroupVersion()]; s != nil {
		structuraldefaulting.Default(u.Object, s)
	}
}

// unstructuredCreater makes the empty object of a kind.
type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// EmptyObject is the live object of an object that does not exist yet.
func (k *Kind) EmptyObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(k.GVK())
	return u
}

// ResetsManagedFields tells whether obj asks for its managedFields to be
// reset: an empty list, or a list of one empty entry, as Kubernetes
// accepts. It is read before coercion, which drops an empty list.
func ResetsManagedFields(obj *unstructured.Unstructured) bool {
	md, _ := obj.Object["metadata"].(map[string]any)
	l, ok := md["managedFields"].([]any)
	if !ok {
		return false
	}
	switch len(l) {
	case 0:
		return true
	case 1:
		e, ok := l[0].(map[string]any)
		return ok && len(e) == 0
	}
	return false
}

// TrackUpdate records a non-apply write of obj over old (nil on create) in
// obj's managedFields, under manager, as kube-apiserver's handlers do
// before admission. reset says the request asked for managedFields to be
// reset (ResetsManagedFields, read before coercion).
//
// Unlike Kubernetes, only objects that already carry managedFields (that
// someone has applied) are tracked: a create, and a write of an object
// without managedFields, records nothing and keeps whatever managedFields
// the client sent out. Tracking every write would cost more than the rest
// of a create (docs/RATIONALE.md); Kubernetes itself stops tracking the
// updates of an object whose managedFields are empty.
func (k *Kind) TrackUpdate(sub string, old, obj *unstructured.Unstructured, manager string, reset bool) *unstructured.Unstructured {
	if old == nil || !hasManagedFields(old) {
		obj.SetManagedFields(nil)
		return obj
	}
	fm := managedFor(k).forSub(sub)
	if fm == nil {
		obj.SetManagedFields(nil)
		return obj
	}
	if reset {
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{})
	}
	// Writes drop a built-in object's undeclared fields at any depth as
	// they decode it (unknownfields.go), by its Go type; one its API's
	// schema does not declare all the same (the two disagree) is left out
	// of what the field manager records, which is all it can type, and
	// the object keeps it.
	in := obj
	if m := managedFor(k); m.builtin != nil {
		in = m.builtin.declaredOnly(obj)
	}
	out, ok := fm.UpdateNoErrors(k.PrunedLive(old), in, manager).(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	if in != obj {
		obj.SetManagedFields(out.GetManagedFields())
		return obj
	}
	return out
}

// PrunedLive is the live object old as the field managers must see it:
// pruned by k's structural schema, as kube-apiserver's custom resource
// decoder gives it. Stored objects are not pruned on read, so after a CRD
// drops a field from its schema they still carry it, and the type
// converter, built from the new schema, refuses them: apply failed, and
// tracked updates were silently not recorded. A built-in kind's object is
// pruned by its API type's schema (builtinTypes.declaredOnly). old is not
// changed.
func (k *Kind) PrunedLive(old *unstructured.Unstructured) *unstructured.Unstructured {
	if k.Builtin {
		if m := managedFor(k); m != nil && m.builtin != nil {
			return m.builtin.declaredOnly(old)
		}
		return old
	}
	if k.structural == nil || k.preserveUnknown {
		return old
	}
	live := old.DeepCopy()
	structuralpruning.Prune(live.Object, k.structural, true)
	return live
}

// hasManagedFields tells whether obj carries managedFields, without
// decoding them.
func hasManagedFields(obj *unstructured.Unstructured) bool {
	md, _ := obj.Object["metadata"].(map[string]any)
	l, _ := md["managedFields"].([]any)
	return len(l) > 0
}

// IgnoreManagedFieldsTimestamps gives obj old's managedFields back when
// they differ only in timestamps and nothing else changed, so that a write
// that changes nothing does not get a new resourceVersion.
func IgnoreManagedFieldsTimestamps(ctx context.Context, obj, old *unstructured.Unstructured) *unstructured.Unstructured {
	if !hasManagedFields(obj) || !hasManagedFields(old) {
		return obj
	}
	out, err := fieldmanager.IgnoreManagedFieldsTimestampsTransformer(ctx, obj, old)
	if err != nil {
		return obj
	}
	if u, ok := out.(*unstructured.Unstructured); ok {
		return u
	}
	return obj
}

// ManagerFromUserAgent is the field manager Kubernetes records for a write
// that names none (its prefixFromUserAgent): the User-Agent up to its first
// '/', printable characters only (invalid UTF-8 becomes U+FFFD), cut before
// the rune that would take it past the 128 bytes a field manager may have.
// The engine validates every manager, this one included, so it must never
// be longer.
func ManagerFromUserAgent(ua string) string {
	prefix, _, _ := strings.Cut(ua, "/")
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
