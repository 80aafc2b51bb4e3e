package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// maxPatchedBytes bounds, in memory, the document a patch produces, before
// it is decoded: twice the object limit, as request bodies are; what is
// stored is held to the object limit itself (fitObject).
func (s *Service) maxPatchedBytes() int { return 2 * s.maxObjectBytes() }

// maxJSONPatchOperations caps the operations of one JSON patch, as
// Kubernetes does.
const maxJSONPatchOperations = 10000

// MaxNestingDepth caps the nesting of the objects a patch makes, as the API
// caps that of request bodies (apiserver.MaxDepth): a JSON patch whose
// paths reach below it would otherwise build, an operation at a time, an
// object nested thousands deep that no create or update could write back,
// each operation walking its path through the whole depth (seconds of CPU
// for a few hundred kilobytes of patch).
const MaxNestingDepth = 100

func init() {
	// The JSON patch library lets "copy" operations grow a document without
	// bound by default (each copy can double it); bound what they may add.
	if jsonpatch.AccumulatedCopySizeLimit == 0 {
		jsonpatch.AccumulatedCopySizeLimit = 2 * DefaultMaxObjectBytes
	}
}

// maxPatchAttempts bounds the retries of a patch (or a delete, or a garbage
// collector edit) that lost a race to another writer; each retry reads the
// fresh object, so contention resolves long before the bound.
const maxPatchAttempts = 64

// Patch applies a merge patch (application/merge-patch+json), a JSON patch
// (application/json-patch+json), or, for built-in kinds, a strategic merge
// patch to an object, or to its status with the subresource "status". A patch
// that carries a resourceVersion is a precondition; one that does not is
// retried on conflict against the fresh object.
//
// A server-side apply (application/apply-patch+yaml, its body given as
// JSON) goes to Apply.
func (s *Service) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (patched *unstructured.Unstructured, err error) {
	if pt == types.ApplyPatchType {
		out, _, err := s.Apply(ctx, gvr, namespace, name, data, opts, subresources...)
		return out, err
	}
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "patch", gvr, namespace, name, strings.Join(subresources, "/"), patchBody(data))
		defer func() { done(auditObject(patched), err) }()
	}
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return nil, err
	}
	if err := validPatchOptions(opts, pt); err != nil {
		return nil, err
	}
	sub := ""
	switch {
	case len(subresources) == 0:
	case len(subresources) == 1 && subresources[0] == "status" && sv.Status:
		sub = "status"
	case len(subresources) == 1 && subresources[0] == "scale" && sv.Scale:
		return s.patchScale(ctx, sv, namespace, name, pt, data, opts)
	default:
		return nil, notServed(gvr)
	}
	uopts := metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation}
	for attempt := 1; ; attempt++ {
		kv, err := s.store.Get(ctx, key(sv, namespace, name), store.GetOptions{})
		if err != nil {
			return nil, storeError(err, gvr.GroupResource(), name)
		}
		old, err := sv.Decode(kv)
		if err != nil {
			return nil, err
		}
		obj, err := applyPatch(sv, old, pt, data, s.maxPatchedBytes())
		if err != nil {
			return nil, err
		}
		// A patch may not move the object (Kubernetes' checkName).
		if n := obj.GetName(); n != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, name))
		}
		if ns := obj.GetNamespace(); namespace != "" && ns != "" && ns != namespace {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", ns, namespace))
		}
		rv := obj.GetResourceVersion()
		pinned := rv != old.GetResourceVersion()
		if pinned && rv != "" {
			return nil, apierrors.NewConflict(gvr.GroupResource(), name, errors.New(conflictMessage))
		}
		out, _, err := s.writeUpdate(ctx, storedUpdate{kind: sv, stored: kv, old: old, obj: obj, sub: sub, opts: uopts})
		if apierrors.IsConflict(err) && !pinned && attempt < maxPatchAttempts {
			continue
		}
		if cause, ok := kinds.DecodeCause(err); ok {
			return nil, patchDecodeError(sv, old, pt, data, s.maxPatchedBytes(), cause)
		}
		return out, err
	}
}

// patchDecodeError is kube-apiserver's answer to a patch whose result does
// not decode into its kind's Go type, cause being the decoder's error: 422
// Invalid with no kind nor name, its field "patch" holding the patched
// object for a JSON or merge patch, or the patch itself for a strategic
// merge patch, whose result kube-apiserver converts from its map (and
// whose error is the converter's). The patched object is written as
// Setpoint holds it (its keys sorted), which kube-apiserver writes with
// the current object's metadata in its Go type's order.
func patchDecodeError(sv *kinds.Kind, old *unstructured.Unstructured, pt types.PatchType, data []byte, max int, cause error) error {
	obj, err := applyPatch(sv, old, pt, data, max)
	if err != nil {
		return err
	}
	if pt == types.StrategicMergePatchType {
		var patch map[string]any
		if err := utiljson.Unmarshal(data, &patch); err == nil {
			if cerr := sv.ConvertError(obj.Object); cerr != nil {
				cause = cerr
			}
			return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
				field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patch), cause.Error())})
		}
	}
	patched, err := obj.MarshalJSON()
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), string(bytes.TrimSpace(patched)), cause.Error())})
}

// applyPatch returns old with the patch applied, unless the result is
// larger than max bytes.
func applyPatch(sv *kinds.Kind, old *unstructured.Unstructured, pt types.PatchType, data []byte, max int) (*unstructured.Unstructured, error) {
	cur, err := old.MarshalJSON()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(cur, data)
		if err != nil {
			// kube-apiserver decodes the patch first (for kubectl's
			// strict field validation) and reports why it is not JSON.
			var v map[string]any
			if derr := utiljson.Unmarshal(data, &v); derr != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", derr))
			}
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid merge patch: %v", err))
		}
	case types.JSONPatchType:
		p, derr := jsonpatch.DecodePatch(data)
		if derr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", derr))
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the JSON patch has %d operations, more than %d", len(p), maxJSONPatchOperations))
		}
		notApplied := func(err error) error {
			// Kubernetes answers 422 with a generic message here; the
			// library's reason (a missing path, a failed test) is what the
			// client needs to fix its patch, so it is the cause.
			return apierrors.NewInvalid(schema.GroupKind{Group: sv.GVR.Group, Kind: sv.Kind}, old.GetName(), field.ErrorList{{
				Type: field.ErrorTypeInvalid, Field: "patch", BadValue: field.OmitValueType{},
				Detail: fmt.Sprintf("the JSON patch could not be applied: %v", err),
			}})
		}
		if err := patchPathsWithin(p, MaxNestingDepth); err != nil {
			return nil, notApplied(err)
		}
		patched, err = p.Apply(cur)
		if err != nil {
			return nil, notApplied(err)
		}
		// An object may nest past the bound already, in its managed
		// fields (which mirror its fields a few levels down) when not in
		// its own: the patch must not take it deeper than it was.
		if objjson.Deeper(patched, MaxNestingDepth) && objjson.Depth(patched) > objjson.Depth(cur) {
			return nil, notApplied(fmt.Errorf("the patched object nests deeper than %d levels", MaxNestingDepth))
		}
	case types.StrategicMergePatchType:
		if sv.StrategicPatchType() == nil {
			return nil, unsupportedPatch(sv)
		}
		patched, err = strategicpatch.StrategicMergePatch(cur, data, sv.StrategicPatchType())
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid strategic merge patch: %v", err))
		}
	default:
		return nil, unsupportedPatch(sv)
	}
	if len(patched) > max {
		return nil, objectTooLarge(len(patched), max/2)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(patched, &m); err != nil || m == nil {
		return nil, apierrors.NewBadRequest("the patched object is not a JSON object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// patchPathsWithin refuses a JSON patch with a path (or a from) of more
// than max segments: it could only name a place below an object's bound.
func patchPathsWithin(p jsonpatch.Patch, max int) error {
	for _, op := range p {
		for _, get := range []func() (string, error){op.Path, op.From} {
			path, err := get()
			if err != nil {
				continue // none: the library reports what an op lacks
			}
			if n := strings.Count(path, "/"); n > max {
				return fmt.Errorf("the path %.64q... has %d segments, more than the %d an object may nest", path, n, max)
			}
		}
	}
	return nil
}

// unsupportedPatch is the 415 of a patch of a type sv does not
// take. Like kube-apiserver's, its message lists the patch types sv takes
// and nothing else, and it carries no details.
func unsupportedPatch(sv *kinds.Kind) error {
	accepted := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if sv.StrategicPatchType() != nil {
		accepted = append(accepted, string(types.StrategicMergePatchType))
	}
	if sv.FieldManager("") != nil {
		accepted = append(accepted, string(types.ApplyYAMLPatchType))
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", "),
	}}
}
