package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// validPatchOptions checks a patch's options as kube-apiserver does: an
// apply names its field manager, only an apply may force.
func validPatchOptions(opts metav1.PatchOptions, pt types.PatchType) error {
	return invalidOptions("PatchOptions", metav1validation.ValidatePatchOptions(&opts, pt))
}

// Apply is server-side apply (a patch of type application/apply-patch+yaml,
// given here as JSON): data is the caller's applied configuration, merged
// into the object (or its status, with the subresource "status") by the
// kind's field manager, which records what opts.FieldManager owns in
// metadata.managedFields and refuses (409, one cause per field) to change a
// field another manager owns unless opts.Force is set. An object that does
// not exist is created (created is then true). The result goes through the
// same defaulting, pruning, admission and validation as any other write.
func (s *Service) Apply(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, data []byte, opts metav1.PatchOptions, subresources ...string) (out *unstructured.Unstructured, created bool, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "patch", gvr, namespace, name, strings.Join(subresources, "/"), patchBody(data))
		defer func() { done(auditObject(out), err) }()
	}
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return nil, false, err
	}
	sub := ""
	switch {
	case len(subresources) == 0:
	case len(subresources) == 1 && subresources[0] == "status" && sv.Status:
		sub = "status"
	case len(subresources) == 1 && subresources[0] == "scale" && sv.Scale:
		return nil, false, unsupportedPatch(sv)
	default:
		return nil, false, notServed(gvr)
	}
	fm := sv.FieldManager(sub)
	if fm == nil {
		return nil, false, unsupportedPatch(sv)
	}
	if err := validPatchOptions(opts, types.ApplyPatchType); err != nil {
		return nil, false, err
	}
	force := opts.Force != nil && *opts.Force
	var applied map[string]any
	if err := utiljson.Unmarshal(data, &applied); err != nil || applied == nil {
		msg := "the applied configuration is not an object"
		if err != nil {
			msg = err.Error()
		}
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %s", msg))
	}
	objjson.NormalizeNumbers(applied)
	preconditioned := (&unstructured.Unstructured{Object: applied}).GetResourceVersion() != ""
	uopts := metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation}
	for attempt := 1; ; attempt++ {
		kv, err := s.store.Get(ctx, key(sv, namespace, name), store.GetOptions{})
		notFound := errors.Is(err, store.ErrNotFound)
		if err != nil && !(notFound && sub == "") {
			return nil, false, storeError(err, gvr.GroupResource(), name)
		}
		var old *unstructured.Unstructured
		if notFound {
			old = sv.EmptyObject()
		} else if old, err = sv.Decode(kv); err != nil {
			return nil, false, err
		}
		live := old
		if !notFound {
			live = sv.PrunedLive(old)
		}
		obj, err := applyTo(fm, sv.TypeConverter(), live, applied, opts.FieldManager, force)
		if err != nil {
			return nil, false, err
		}
		if err := checkApplied(sv, obj, namespace, name); err != nil {
			return nil, false, err
		}
		if notFound {
			if obj.GetUID() != "" {
				return nil, false, apierrors.NewConflict(gvr.GroupResource(), name,
					fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", obj.GetUID()))
			}
			if obj.GetResourceVersion() != "" {
				return nil, false, apierrors.NewConflict(gvr.GroupResource(), name, errors.New(conflictMessage))
			}
			if err := checkCreate(ctx); err != nil {
				return nil, false, err
			}
			copts := metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation}
			out, _, err := s.create(ctx, gvr, obj, copts, tracked)
			if apierrors.IsAlreadyExists(err) && attempt < maxPatchAttempts {
				continue // created meanwhile: apply to it
			}
			return out, err == nil, err
		}
		if preconditioned && obj.GetResourceVersion() != old.GetResourceVersion() {
			return nil, false, apierrors.NewConflict(gvr.GroupResource(), name, errors.New(conflictMessage))
		}
		out, _, err := s.writeUpdate(ctx, storedUpdate{kind: sv, stored: kv, old: old, obj: obj, sub: sub, opts: uopts, fields: tracked})
		if apierrors.IsConflict(err) && !preconditioned && attempt < maxPatchAttempts {
			continue // written meanwhile: apply to what is there now
		}
		if apierrors.IsNotFound(err) && sub == "" && !preconditioned && attempt < maxPatchAttempts {
			// Deleted since the read: apply creates, as kube-apiserver's
			// patch handler does (the next read takes the create path).
			// Not with a resourceVersion precondition, nor for /status,
			// whose object must exist.
			continue
		}
		return out, false, err
	}
}

// applyTo merges the applied configuration into a copy of old (the live
// object as Kind.PrunedLive gives it) with fm, whose type converter is tc.
func applyTo(fm *managedfields.FieldManager, tc managedfields.TypeConverter, old *unstructured.Unstructured, applied map[string]any, manager string, force bool) (*unstructured.Unstructured, error) {
	patch := &unstructured.Unstructured{Object: deepCopyMap(applied)}
	res, err := fm.Apply(old, patch, manager, force)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err // conflicts, a wrong apiVersion, managedFields set
		}
		// An applied configuration the schema does not type (a field it
		// does not declare, a value of the wrong type) is the client's
		// error. Otherwise the error comes from the stored object (its
		// typing, its managedFields, their conversion): the server's.
		if _, perr := tc.ObjectToTyped(patch); perr != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return nil, apierrors.NewInternalError(err)
	}
	obj, ok := res.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("apply returned %T", res))
	}
	if obj == old {
		obj = obj.DeepCopy()
	}
	objjson.NormalizeNumbers(obj.Object)
	return obj, nil
}

// checkApplied checks that the applied object is the one the request
// names, in its namespace.
func checkApplied(sv *kinds.Kind, obj *unstructured.Unstructured, namespace, name string) error {
	if n := obj.GetName(); n != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, name))
	}
	if sv.Namespaced {
		if ns := obj.GetNamespace(); ns != "" && ns != namespace {
			return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ns, namespace))
		}
		obj.SetNamespace(namespace)
	} else if obj.GetNamespace() != "" {
		obj.SetNamespace("")
	}
	return nil
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
