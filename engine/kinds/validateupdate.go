package kinds

import (
	"context"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// validateUpdate validates an update of a custom resource with the checks,
// order and errors of the ValidateUpdate of the apiextensions custom
// resource strategy (type, metadata update, OpenAPI schema with validation
// ratcheting, embedded resources, list sets and maps unless the old object
// broke them already, CEL rules with ratcheting and transition rules), with
// createValidation's savings: metadata read directly, and the embedded and
// list-type walks skipped when the schema can give them nothing to report.
func (v *createValidation) validateUpdate(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	r := v.ratchet(obj, old, false)
	errs := v.typeMeta(obj)
	if len(errs) == 0 {
		errs = append(errs, v.metaUpdate(ctx, obj, old)...)
		b := v.validator.withContext(ctx)
		errs = append(errs, schemaUpdate(nil, obj.Object, old.Object, b, r.options)...)
		if b.stopped {
			r.observe()
			return append(errs, rulesNotChecked())
		}
	}
	if v.embedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, v.structural, false)...)
	}
	if v.listTypes {
		if oldErrs := v.listErrors(old.Object); len(oldErrs) == 0 {
			errs = append(errs, v.listErrors(obj.Object)...)
		}
	}
	errs = v.celRules(ctx, errs, obj, old.Object, r.celOptions...)
	r.observe()
	return errs
}

// validateStatusUpdate validates an update through the status subresource
// as the ValidateUpdate of the apiextensions status strategy does: as
// validateUpdate, but the schema check covers status alone (with the status
// schema), embedded resources are not checked, and list sets and maps are
// reported when the new object breaks them and the old one did not.
func (v *createValidation) validateStatusUpdate(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	r := v.ratchet(obj, old, true)
	errs := v.typeMeta(obj)
	if len(errs) == 0 {
		errs = append(errs, v.metaUpdate(ctx, obj, old)...)
		if status, ok := obj.Object["status"]; ok && v.statusValidator != nil {
			b := v.statusValidator.withContext(ctx)
			errs = append(errs, schemaUpdate(field.NewPath("status"), status, old.Object["status"], b, r.options)...)
			if b.stopped {
				r.observe()
				return append(errs, rulesNotChecked())
			}
		}
	}
	if v.listTypes {
		if newErrs := v.listErrors(obj.Object); len(newErrs) > 0 {
			if oldErrs := v.listErrors(old.Object); len(oldErrs) == 0 {
				errs = append(errs, newErrs...)
			}
		}
	}
	errs = v.celRules(ctx, errs, obj, old.Object, r.celOptions...)
	r.observe()
	return errs
}

// schemaUpdate returns the errors of ValidateCustomResourceUpdate. With
// ratcheting on, the validator first validates the new value alone, as a
// create does (boundedRequest.ValidateUpdate): ratcheting only turns errors
// into warnings (where a subtree equals its old value), so a value valid
// alone gives no errors either way, and the tree of correlated old values
// and ratcheting validators is only built when there are errors to ratchet
// (then with exactly the library's result).
func schemaUpdate(path *field.Path, obj, old any, validator *boundedRequest, options []apiservervalidation.ValidationOption) field.ErrorList {
	return apiservervalidation.ValidateCustomResourceUpdate(path, obj, old, validator, options...)
}

// typeMeta checks kind and apiVersion, as the strategy's ValidateTypeMeta.
func (v *createValidation) typeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if k := u.GetKind(); k != v.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), k, "must be "+v.gvk.Kind))
	}
	if av, want := u.GetAPIVersion(), v.gvk.Group+"/"+v.gvk.Version; av != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), av, "must be "+want))
	}
	return errs
}

// metaUpdate validates the metadata of an update against the old one.
func (v *createValidation) metaUpdate(ctx context.Context, obj, old *unstructured.Unstructured) field.ErrorList {
	meta, errs := validationMeta(obj.Object)
	if len(errs) > 0 {
		return errs
	}
	oldMeta, errs := validationMeta(old.Object)
	if len(errs) > 0 {
		return errs
	}
	return validation.ValidateObjectMetaDeclaratively(ctx, operation.Update, meta, oldMeta, v.namespaced, nil,
		field.NewPath("metadata"), utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))
}

// ratcheting holds an update's validation ratcheting, as the strategies set
// it up: nothing when the CRDValidationRatcheting feature is off.
type ratcheting struct {
	correlated *common.CorrelatedObject
	options    []apiservervalidation.ValidationOption
	celOptions []cel.Option
}

// ratchet correlates obj with old for ratcheting when the feature is on;
// the schema options ratchet status alone when status is set (and only
// with a structural schema, as the status strategy does).
func (v *createValidation) ratchet(obj, old *unstructured.Unstructured, status bool) ratcheting {
	if !utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CRDValidationRatcheting) {
		return ratcheting{}
	}
	r := ratcheting{correlated: common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: v.structural})}
	switch {
	case !status:
		r.options = append(r.options, apiservervalidation.WithRatcheting(r.correlated))
	case v.structural != nil:
		r.options = append(r.options, apiservervalidation.WithRatcheting(r.correlated.Key("status")))
	}
	r.celOptions = append(r.celOptions, cel.WithRatcheting(r.correlated))
	return r
}

// observe records the time ratcheting took, as the strategies do.
func (r ratcheting) observe() {
	if r.correlated != nil {
		apiservervalidation.Metrics.ObserveRatchetingTime(*r.correlated.Duration)
	}
}

// celRules appends the errors of the kind's CEL rules (with old nil on a
// create), or the note that they were not run when errs already holds a
// blocking error.
func (v *createValidation) celRules(ctx context.Context, errs field.ErrorList, obj *unstructured.Unstructured, old any, options ...cel.Option) field.ErrorList {
	if v.cel == nil {
		return errs
	}
	if blocking(errs) {
		return append(errs, rulesNotChecked())
	}
	if v.celPass.pass(ctx, obj.Object, old) {
		return errs // every rule holds: the validator would report nothing
	}
	if len(options) > 0 {
		// Ratcheting only turns rule failures into warnings; the rules are
		// evaluated alike either way. Rules that all pass without it pass
		// with it and warn of nothing, so the walk that correlates each node
		// with its old value is only made when there are failures to ratchet.
		if cerrs, _ := v.cel.Validate(ctx, nil, v.structural, obj.Object, old, celconfig.RuntimeCELCostBudget); len(cerrs) == 0 {
			return errs
		}
	}
	cerrs, _ := v.cel.Validate(ctx, nil, v.structural, obj.Object, old, celconfig.RuntimeCELCostBudget, options...)
	return append(errs, cerrs...)
}

// rulesNotChecked is the error that says CEL rules were not evaluated.
func rulesNotChecked() *field.Error {
	return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
}
