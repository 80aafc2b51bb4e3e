package kinds

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"context"
	"fmt"
	"strings"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// CheckType fills an object's apiVersion and kind, or rejects a mismatch.
func (k *Kind) CheckType(obj *unstructured.Unstructured) error {
	gv := k.GVR.GroupVersion().String()
	if av := obj.GetAPIVersion(); av == "" {
		obj.SetAPIVersion(gv)
	} else if av != gv {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, gv))
	}
	if kind := obj.GetKind(); kind == "" {
		obj.SetKind(k.Kind)
	} else if kind != k.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", kind, k.Kind))
	}
	return nil
}

// Coerce defaults and prunes obj by its kind's structural schema, as the
// Kubernetes decoder does, and returns the paths of the unknown fields it
// dropped. A built-in kind's object is pruned by its Go type, at any depth
// (unknownfields.go); one that does not decode into it (a string for a
// list) is refused with the decoder's error, 400 BadRequest, as
// kube-apiserver's decoder refuses it, before unknown fields are looked for.
func (k *Kind) Coerce(obj *unstructured.Unstructured) ([]string, error) {
	return k.coerce(obj, true)
}

// CoerceBuilt is Coerce for an object built in code in the shape its kind
// stores (WithBuiltShape): a built-in kind's decoding into its Go type,
// which finds unknown and mistyped fields and gives the stored shape, is
// left out; only unknown top-level fields are dropped.
func (k *Kind) CoerceBuilt(obj *unstructured.Unstructured) ([]string, error) {
	return k.coerce(obj, false)
}

type builtShapeKey struct{}

// WithBuiltShape marks the writes made with ctx as of objects the server
// built itself in the shape their kind stores (the controllers' Events,
// written for every reconcile outcome), which the engine coerces with
// CoerceBuilt. Never for an object that came in a request.
func WithBuiltShape(ctx context.Context) context.Context {
	return context.WithValue(ctx, builtShapeKey{}, true)
}

// BuiltShape reports whether ctx carries WithBuiltShape.
func BuiltShape(ctx context.Context) bool {
	b, _ := ctx.Value(builtShapeKey{}).(bool)
	return b
}

func (k *Kind) coerce(obj *unstructured.Unstructured, typed bool) ([]string, error) {
	apiVersion, kind := obj.GetAPIVersion(), obj.GetKind()
	canonical, meta, found, unknown, err := objectMeta(obj.Object)
	if err != nil {
		// Metadata that does not decode is the object's decoding error,
		// spelled for a built-in kind as its Go type's decoder spells it.
		if k.typed != nil {
			if derr := k.typed.decode(obj.Object); derr != nil {
				err = derr
			}
		}
		return nil, k.DecodeError(err)
	}
	if k.structural == nil {
		// Metadata is written back as decoding it into ObjectMeta leaves
		// it: without unknown fields, and without empty labels and
		// annotations (a label's removal leaves none, not {}).
		if err := setObjectMeta(obj.Object, canonical, meta, found); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata: %v", err))
		}
		if k.typed != nil && typed {
			paths, err := k.typed.prune(obj.Object, func() *builtinTypes { return k.typed.schemaOf(k) })
			if err != nil {
				return nil, k.DecodeError(err)
			}
			return append(unknown, paths...), nil
		}
		for f := range obj.Object {
			if k.fields != nil && !k.fields[f] {
				delete(obj.Object, f)
				unknown = append(unknown, f)
			}
		}
		return unknown, nil
	}
	if k.defaultsBuilt {
		structuraldefaulting.Default(obj.Object, k.defaults)
	} else {
		structuraldefaulting.Default(obj.Object, k.structural)
	}
	if !k.preserveUnknown {
		unknown = append(unknown, structuralpruning.PruneWithOptions(obj.Object, k.structural, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		if hasNull(obj.Object) { // it deletes null members only: a walk of the schema for none
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, k.structural)
		}
	}
	if !k.noEmbedded { // only embedded resources are coerced below the root
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj.Object, k.structural, false,
			schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
		if ferr != nil {
			return nil, apierrors.NewBadRequest(ferr.Error())
		}
		unknown = append(unknown, paths...)
	}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	if err := setObjectMeta(obj.Object, canonical, meta, found); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata: %v", err))
	}
	return unknown, nil
}

// hasNull reports whether v holds a null anywhere.
func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

// StrictFields applies fieldValidation to the unknown fields found: Strict
// rejects them, Warn (the default) reports each as a warning through the
// context's warning recorder, Ignore drops them silently.
func (k *Kind) StrictFields(ctx context.Context, fieldValidation string, unknown []string) error {
	if len(unknown) == 0 || fieldValidation == metav1.FieldValidationIgnore {
		return nil
	}
	if fieldValidation != metav1.FieldValidationStrict {
		for _, p := range unknown {
			warning.AddWarning(ctx, "", fmt.Sprintf("unknown field %q", p))
		}
		return nil
	}
	// The fields are listed as Kubernetes lists them, up to
	// MaxValidationErrors: an object may have many thousands.
	msgs := make([]string, 0, min(len(unknown), MaxValidationErrors+1))
	for _, p := range unknown[:min(len(unknown), MaxValidationErrors)] {
		msgs = append(msgs, fmt.Sprintf("unknown field %q", p))
	}
	if more := len(unknown) - MaxValidationErrors; more > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more unknown fields", more))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
		k.Kind, k.GVR.Version, k.Kind, strings.Join(msgs, ", ")))
}

// ValidateCreate runs the kind's create validation.
func (k *Kind) ValidateCreate(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	if k.createValidation != nil {
		return k.createValidation.validate(ctx, obj)
	}
	return k.strategy.Validate(ctx, obj)
}

// ValidateUpdate runs the kind's update validation (of the status
// subresource when sub is "status", of a namespace's finalize subresource
// when it is "finalize").
func (k *Kind) ValidateUpdate(ctx context.Context, sub string, obj, old *unstructured.Unstructured) field.ErrorList {
	switch {
	case k.createValidation == nil:
	case sub == "status":
		return k.createValidation.validateStatusUpdate(ctx, obj, old)
	default:
		return k.createValidation.validateUpdate(ctx, obj, old)
	}
	if sub == "status" {
		return k.statusStrategy.ValidateUpdate(ctx, obj, old)
	}
	if sub == "finalize" && k.Builtin && k.GVR == NamespaceResource {
		return validateNamespaceFinalize(obj, old)
	}
	return k.strategy.ValidateUpdate(ctx, obj, old)
}

// Invalid is the 422 Invalid answer for errs (nil when there are none),
// bounded as newInvalid says.
func (k *Kind) Invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return newInvalid(k.GVK().GroupKind(), name, errs)
}

// AllowsUnconditionalUpdate says whether an update without a resourceVersion
// may replace whatever is stored: the strategy's answer where it has one (the
// custom resource strategy says no), else yes for the built-in namespaces and
// events and no for CustomResourceDefinitions, as Kubernetes' strategies say.
func (k *Kind) AllowsUnconditionalUpdate() bool {
	if u, ok := k.strategy.(interface{ AllowUnconditionalUpdate(context.Context) bool }); ok {
		return u.AllowUnconditionalUpdate(context.Background())
	}
	return k.Builtin && k.GVR != CRDResource
}

// PrepareForCreate runs the strategy's PrepareForCreate.
func (k *Kind) PrepareForCreate(ctx context.Context, obj *unstructured.Unstructured) {
	if !k.setsGeneration() {
		defer keepGeneration(obj)()
	}
	k.strategy.PrepareForCreate(ctx, obj)
}

// setsGeneration reports whether the kind's strategy sets
// metadata.generation. Leases are a Kubernetes kind served by a
// CustomResourceDefinition: Kubernetes' Lease strategy never sets it, so
// a Lease keeps the generation it was created with (none, unless its
// creator sent one) rather than the custom resource strategy's count.
func (k *Kind) setsGeneration() bool { return k.GVR != leaseResource }

// keepGeneration returns a function that puts obj's metadata.generation
// back as it is now, or removes it if it is absent now.
func keepGeneration(obj *unstructured.Unstructured) func() {
	md, _ := obj.Object["metadata"].(map[string]any)
	g, had := md["generation"]
	return func() {
		md, ok := obj.Object["metadata"].(map[string]any)
		switch {
		case !ok:
		case had:
			md["generation"] = g
		default:
			delete(md, "generation")
		}
	}
}

// Strategy returns the kind's strategy, that of its status subresource
// when sub is "status".
func (k *Kind) Strategy(sub string) Strategy {
	if sub == "status" {
		return k.statusStrategy
	}
	return k.strategy
}

// SchemaValidated reports whether the kind's objects are validated by
// Setpoint's own schema validation (validate.go) rather than its strategy:
// custom resources without a scale subresource. Their updates other than
// of status are prepared by PrepareForUpdate, as the custom resource
// strategy prepares them.
func (k *Kind) SchemaValidated() bool { return k.createValidation != nil }

// PrepareForUpdate runs the strategy's PrepareForUpdate (of the status
// subresource when sub is "status"). For custom resources other than their
// status it is done here, as the custom resource strategy does it: status
// is kept as stored when the kind has a status subresource, and generation
// goes up when anything but metadata changed, compared without reflection
// (but see setsGeneration).
func (k *Kind) PrepareForUpdate(ctx context.Context, sub string, obj, old *unstructured.Unstructured) {
	if !k.setsGeneration() {
		defer keepGeneration(obj)()
	}
	if sub == "status" || !k.SchemaValidated() {
		k.Strategy(sub).PrepareForUpdate(ctx, obj, old)
		return
	}
	if k.Status {
		if st, ok := old.Object["status"]; ok {
			obj.Object["status"] = st
		} else {
			delete(obj.Object, "status")
		}
	}
	if !objjson.SemanticEqual(withoutMetadata(obj.Object), withoutMetadata(old.Object)) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
}

// withoutMetadata returns a copy of obj's top level without metadata.
func withoutMetadata(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// Terminating reports whether the kind's CRD is being deleted: its objects
// are being deleted, and creates are refused.
func (k *Kind) Terminating() bool { return k.terminating }

// StrategicPatchType is the typed object strategic merge patches are
// computed against; nil when the kind only takes merge and JSON patches.
func (k *Kind) StrategicPatchType() any { return k.strategicPatch }

// ConvertToTable renders obj (an object or a list of the kind) as a meta/v1
// Table with the kind's printer columns.
func (k *Kind) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return k.table.ConvertToTable(ctx, obj, opts)
}
