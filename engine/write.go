package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// invalidOptions is the 422 kube-apiserver's handlers answer for a
// write's options that its validation refuses (an unknown dryRun or
// fieldValidation value, a bad fieldManager); kind names the options.
func invalidOptions(kind string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// Create stores a new object. Its namespace is the object's; server-owned
// metadata (uid, creationTimestamp, resourceVersion, generation, deletion
// fields) is set by the server whatever the client sent (CreateJSON, the
// API's create, refuses a resourceVersion as kube-apiserver does; Create,
// for the engine's own callers, drops it). It leaves obj as
// it is: it is CreateJSON on a copy whose numbers are normalised
// (objjson.NormalizeNumbers), so that an object built with encoding/json,
// all of whose numbers are float64, is taken as its integers.
func (s *Service) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	obj = obj.DeepCopy()
	obj.SetResourceVersion("")
	objjson.NormalizeNumbers(obj.Object)
	out, _, err := s.CreateJSON(ctx, gvr, obj, opts)
	return out, err
}

// CreateJSON is Create that also returns the created object as JSON: the
// document written to the store with its resourceVersion spliced in, so that
// a caller answering with it need not encode the object again. The JSON is
// nil after a dry run; the caller then encodes the object. Unlike Create,
// CreateJSON takes obj over: it works on obj itself rather than a copy, so
// the caller must not use obj afterwards (the API hands it a freshly decoded
// request body). Its numbers are taken as the request wrote them: as
// objjson.Decode gives them, a number written with a fraction or an
// exponent (1.0, 1e0) is a float64, which an integer field of a built-in
// kind refuses, as kube-apiserver's decoder refuses it.
func (s *Service) CreateJSON(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (out *unstructured.Unstructured, doc []byte, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "create", gvr, namespaceOf(obj), "", "", auditObject(obj.DeepCopy()))
		defer func() { done(auditObject(out), err) }()
	}
	return s.create(ctx, gvr, obj, opts, trackWrite)
}

// managedFields says who records a write in metadata.managedFields.
type managedFields int

const (
	// trackWrite: the write pipeline does. An update is recorded as an
	// Update by the options' field manager; a create records none, and
	// clients may not set them. fitObject may drop them to fit the size
	// bound.
	trackWrite managedFields = iota
	// tracked: the caller has set them (server-side apply's field manager,
	// or a write through /scale recording itself), and they are stored as
	// they are: field ownership is the point of such a write.
	tracked
)

// create runs the create pipeline on obj, which it takes over; fields says
// who records the create in managedFields.
func (s *Service) create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions, fields managedFields) (*unstructured.Unstructured, []byte, error) {
	if obj == nil || obj.Object == nil {
		return nil, nil, apierrors.NewBadRequest("no object to create")
	}
	sv, err := s.lookup(gvr, obj.GetNamespace(), false)
	if err != nil {
		return nil, nil, err
	}
	if sv.Terminating() {
		err := apierrors.NewMethodNotSupported(gvr.GroupResource(), "create")
		err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
		return nil, nil, err
	}
	if err := invalidOptions("CreateOptions", metav1validation.ValidateCreateOptions(&opts)); err != nil {
		return nil, nil, err
	}
	dry := len(opts.DryRun) > 0
	normalizeNumbers(sv, obj)
	if err := sv.CheckType(obj); err != nil {
		return nil, nil, err
	}
	ns := obj.GetNamespace()
	if sv.Namespaced {
		if err := s.checkNamespace(ctx, gvr.GroupResource(), obj.GetName(), ns); err != nil {
			return nil, nil, err
		}
	}
	unknown, err := coerce(ctx, sv, obj)
	if err != nil {
		return nil, nil, err
	}
	// Unknown fields are found as the object is decoded, before admission
	// and validation, as kube-apiserver finds them.
	if err := sv.StrictFields(ctx, opts.FieldValidation, unknown); err != nil {
		return nil, nil, err
	}
	if fields == trackWrite {
		// A create records no Update entry (see Kind.TrackUpdate), and clients
		// may not set managedFields.
		obj.SetManagedFields(nil)
	}
	req := newAdmissionRequest(ctx, OpCreate, sv, "", obj, nil, dry)
	if err := s.mutateAndCoerce(ctx, sv, req, obj); err != nil {
		return nil, nil, err
	}
	// The name is generated after mutating admission, which sees the
	// name the client sent ("") and the generateName it may change, as
	// kube-apiserver's rest.BeforeCreate generates it; validating
	// admission is asked about the generated name.
	generated := obj.GetName() == "" && obj.GetGenerateName() != ""
	if generated {
		obj.SetName(names.SimpleNameGenerator.GenerateName(obj.GetGenerateName()))
		req.Name = obj.GetName()
	}
	// The server's metadata is set after mutating admission, which sees
	// what the client sent, as kube-apiserver's rest.BeforeCreate sets it.
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(s.opts.Now()))
	sentRV := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
	sv.PrepareForCreate(ctx, obj)
	if h := hooksOf(sv); h != nil {
		if err := h.prepare(ctx, s, "", obj.Object, nil); err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	}
	if obj.GetName() == "" {
		return nil, nil, sv.Invalid("", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if err := sv.Invalid(obj.GetName(), sv.ValidateCreate(ctx, obj)); err != nil {
		return nil, nil, err
	}
	if err := s.validateAdmission(ctx, req); err != nil {
		return nil, nil, err
	}
	if dry {
		// A dry run answers as the write would: AlreadyExists included.
		if _, err := s.store.Get(ctx, key(sv, ns, obj.GetName()), store.GetOptions{}); err == nil {
			return nil, nil, apierrors.NewAlreadyExists(gvr.GroupResource(), obj.GetName())
		}
		return obj, nil, nil
	}
	// kube-apiserver's storage refuses a create that carries a
	// resourceVersion, as a plain error (500 with no reason), after
	// admission and validation and not on a dry run; one that is not a
	// positive integer it ignores. kubectl create and apply clear it.
	if rv, err := strconv.ParseUint(sentRV, 10, 64); err == nil && rv != 0 && fields == trackWrite {
		return nil, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created",
		}}
	}
	var body []byte
	for attempt := 0; ; attempt++ {
		b, err := sv.Encode(obj)
		if err != nil {
			return nil, nil, err
		}
		if b, err = s.fitObject(sv, obj, b, fields, 0); err != nil {
			return nil, nil, err
		}
		rev, err := s.store.Create(ctx, key(sv, ns, obj.GetName()), b)
		if err == nil {
			s.noteWrite(ctx, sv, rev)
		}
		if errors.Is(err, store.ErrAlreadyExists) && generated && attempt < 3 {
			obj.SetName(names.SimpleNameGenerator.GenerateName(obj.GetGenerateName()))
			continue
		}
		if err != nil {
			return nil, nil, storeError(err, gvr.GroupResource(), obj.GetName())
		}
		if sv.Namespaced {
			if err := s.recheckNamespace(ctx, gvr.GroupResource(), key(sv, ns, obj.GetName()), obj.GetName(), ns, rev); err != nil {
				return nil, nil, err
			}
		}
		obj.SetResourceVersion(strconv.FormatInt(rev, 10))
		body = sv.ServedJSON(b, rev)
		break
	}
	if h := hooksOf(sv); h != nil {
		h.committed(ctx, s, obj.Object, nil)
	}
	return obj, body, nil
}

// namespaceTerminatingError is the 403 for a create in the terminating
// namespace ns, with the cause Kubernetes' NamespaceLifecycle admission adds
// (corev1.NamespaceTerminatingCause), which controllers test for with
// apierrors.HasStatusCause to stop retrying.
func namespaceTerminatingError(gr schema.GroupResource, name, ns string) error {
	err := apierrors.NewForbidden(gr, name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", ns),
		Field:   "metadata.namespace",
	})
	return err
}

// Update replaces an object. Its resourceVersion must be the stored one
// (409 Conflict otherwise). As in Kubernetes, only namespaces and events may
// be updated without one (unconditionally); for custom resources and
// CustomResourceDefinitions a missing resourceVersion is invalid (422), so
// that a client cannot overwrite a change it has not seen. Patches need none.
// When the kind has a status subresource, status is kept as stored.
// Its numbers are normalised first, as Create's are.
func (s *Service) Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	out, _, err := s.updateAudited(ctx, gvr, obj, opts, "", true)
	return out, err
}

// UpdateJSON is Update that also returns the object as JSON, made from the
// document written to the store (see CreateJSON); the JSON is nil when
// nothing was written (a dry run, or no change). Update is UpdateJSON with
// the JSON dropped. Both leave obj as it is. UpdateJSON takes obj's
// numbers as the request wrote them (see CreateJSON).
func (s *Service) UpdateJSON(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (out *unstructured.Unstructured, doc []byte, err error) {
	return s.updateAudited(ctx, gvr, obj, opts, "", false)
}

// UpdateStatus replaces the status of an object through its /status
// subresource; everything else is kept as stored.
func (s *Service) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	out, _, err := s.updateAudited(ctx, gvr, obj, opts, "status", true)
	return out, err
}

// UpdateStatusJSON is UpdateStatus that also returns the object as JSON (see
// UpdateJSON); UpdateStatus is UpdateStatusJSON with the JSON dropped.
func (s *Service) UpdateStatusJSON(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (out *unstructured.Unstructured, doc []byte, err error) {
	return s.updateAudited(ctx, gvr, obj, opts, "status", false)
}

// updateAudited is update, audited when the request's user is.
func (s *Service) updateAudited(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub string, goNumbers bool) (out *unstructured.Unstructured, doc []byte, err error) {
	if u := s.auditUser(ctx); u != nil {
		done := s.audit(ctx, u, "update", gvr, namespaceOf(obj), nameOf(obj), sub, auditObject(obj))
		defer func() { done(auditObject(out), err) }()
	}
	return s.update(ctx, gvr, obj, opts, sub, goNumbers)
}

// update writes a copy of obj (left as it is). goNumbers says obj was built
// in Go (Update, UpdateStatus): all its numbers are normalised, where a
// request's are only for custom resources (normalizeNumbers).
func (s *Service) update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub string, goNumbers bool) (*unstructured.Unstructured, []byte, error) {
	if obj == nil || obj.Object == nil {
		return nil, nil, apierrors.NewBadRequest("no object to update")
	}
	sv, err := s.lookup(gvr, obj.GetNamespace(), false)
	if err != nil {
		return nil, nil, err
	}
	if sub == "status" && !sv.Status || sub == "finalize" && !(sv.Builtin && sv.GVR == kinds.NamespaceResource) {
		return nil, nil, notServed(gvr)
	}
	obj = obj.DeepCopy()
	if goNumbers {
		objjson.NormalizeNumbers(obj.Object)
	} else {
		normalizeNumbers(sv, obj)
	}
	if err := sv.CheckType(obj); err != nil {
		return nil, nil, err
	}
	kv, err := s.store.Get(ctx, key(sv, obj.GetNamespace(), obj.GetName()), store.GetOptions{})
	if err != nil {
		if derr := decodeFirst(ctx, sv, obj, opts); derr != nil {
			return nil, nil, derr
		}
		return nil, nil, storeError(err, gvr.GroupResource(), obj.GetName())
	}
	old, err := sv.Decode(kv)
	if err != nil {
		return nil, nil, err
	}
	switch rv := obj.GetResourceVersion(); {
	case rv == "" && !sv.AllowsUnconditionalUpdate():
		if derr := decodeFirst(ctx, sv, obj, opts); derr != nil {
			return nil, nil, derr
		}
		return nil, nil, apierrors.NewInvalid(schema.GroupKind{Group: gvr.Group, Kind: sv.Kind}, obj.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), rv, "must be specified for an update")})
	case rv != "" && rv != old.GetResourceVersion():
		if derr := decodeFirst(ctx, sv, obj, opts); derr != nil {
			return nil, nil, derr
		}
		return nil, nil, apierrors.NewConflict(gvr.GroupResource(), obj.GetName(), errors.New(conflictMessage))
	}
	return s.writeUpdate(ctx, storedUpdate{kind: sv, stored: kv, old: old, obj: obj, sub: sub, opts: opts})
}

// normalizeNumbers normalises the numbers of obj, an object of sv
// (objjson.NormalizeNumbers), unless sv is a built-in kind: its objects
// are decoded into Go types, whose integer fields refuse a number written
// with a fraction or an exponent, which a request body's decoding keeps
// as a float64 (CreateJSON). The callers that build objects in Go
// normalise them first (Create, Update).
func normalizeNumbers(sv *kinds.Kind, obj *unstructured.Unstructured) {
	if !sv.Builtin {
		objjson.NormalizeNumbers(obj.Object)
	}
}

// decodeFirst returns the error decoding obj gives (a value of the wrong
// type, or an unknown field refused by fieldValidation), which
// kube-apiserver answers before it reads the stored object: an update that
// fails on what is stored (not found, a conflict) is answered with it
// first. Unknown fields are warned of as the decoder warns of them. It
// coerces obj, which the caller drops.
func decodeFirst(ctx context.Context, sv *kinds.Kind, obj *unstructured.Unstructured, opts metav1.UpdateOptions) error {
	unknown, err := sv.Coerce(obj)
	if err != nil {
		return err
	}
	return sv.StrictFields(ctx, opts.FieldValidation, unknown)
}

// storedUpdate is a write over a stored object, as writeUpdate takes it:
// from Update, a patch, an apply or a write through /scale.
type storedUpdate struct {
	kind   *kinds.Kind
	stored *store.KeyValue            // the stored document, as read
	old    *unstructured.Unstructured // stored, decoded
	obj    *unstructured.Unstructured // what to write; taken over
	sub    string                     // "", "status", "scale" or "finalize"
	opts   metav1.UpdateOptions
	fields managedFields // who records the write in managedFields
}

// writeUpdate runs the update pipeline of u.obj over u.old. It returns the
// object and, when it wrote one, its JSON as Kind.ServedJSON makes it.
func (s *Service) writeUpdate(ctx context.Context, u storedUpdate) (*unstructured.Unstructured, []byte, error) {
	sv, old, obj, opts, sub := u.kind, u.old, u.obj, u.opts, u.sub
	rev := u.stored.ModRevision
	if err := invalidOptions("UpdateOptions", metav1validation.ValidateUpdateOptions(&opts)); err != nil {
		return nil, nil, err
	}
	dry := len(opts.DryRun) > 0
	if obj.GetName() != old.GetName() {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name of the stored object (%s)", obj.GetName(), old.GetName()))
	}
	if uid := obj.GetUID(); uid != "" && uid != old.GetUID() {
		return nil, nil, apierrors.NewConflict(sv.GVR.GroupResource(), obj.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, old.GetUID()))
	}
	obj.SetNamespace(old.GetNamespace())

	reset := u.fields == trackWrite && kinds.ResetsManagedFields(obj)
	unknown, err := coerce(ctx, sv, obj)
	if err != nil {
		return nil, nil, err
	}
	if err := sv.StrictFields(ctx, opts.FieldValidation, unknown); err != nil {
		return nil, nil, err
	}
	if u.fields == trackWrite {
		obj = sv.TrackUpdate(sub, old, obj, opts.FieldManager, reset)
	}
	req := newAdmissionRequest(ctx, OpUpdate, sv, sub, obj, old, dry)
	if err := s.mutateAndCoerce(ctx, sv, req, obj); err != nil {
		return nil, nil, err
	}
	// A client cannot set the server's metadata. As in Kubernetes'
	// rest.BeforeUpdate it is put back after mutating admission, which
	// sees what the client sent, and before the strategy, which counts
	// generation from the stored one.
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj.SetSelfLink("")
	obj.SetGeneration(old.GetGeneration())
	sv.PrepareForUpdate(ctx, sub, obj, old)
	obj.SetResourceVersion(old.GetResourceVersion())
	if h := hooksOf(sv); h != nil {
		if err := h.prepare(ctx, s, sub, obj.Object, old.Object); err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	}
	if err := sv.Invalid(obj.GetName(), sv.ValidateUpdate(ctx, sub, obj, old)); err != nil {
		return nil, nil, err
	}
	if err := s.validateAdmission(ctx, req); err != nil {
		return nil, nil, err
	}
	obj = kinds.IgnoreManagedFieldsTimestamps(ctx, obj, old)
	if dry || objjson.SemanticEqual(obj.Object, old.Object) && !s.staleStored(u.stored) {
		return obj, nil, nil // nothing to write: the resourceVersion stays
	}
	b, err := sv.Encode(obj)
	if err != nil {
		return nil, nil, err
	}
	if b, err = s.fitObject(sv, obj, b, u.fields, len(u.stored.Value)); err != nil {
		return nil, nil, err
	}
	k := key(sv, obj.GetNamespace(), obj.GetName())
	newRev, err := s.store.Update(ctx, k, b, rev)
	if err == nil {
		s.noteWrite(ctx, sv, newRev)
	}
	if err != nil {
		return nil, nil, storeError(err, sv.GVR.GroupResource(), obj.GetName())
	}
	obj.SetResourceVersion(strconv.FormatInt(newRev, 10))
	body := sv.ServedJSON(b, newRev)
	if h := hooksOf(sv); h != nil {
		h.committed(ctx, s, obj.Object, old.Object)
	}
	if finalized(sv, obj) {
		if err := s.deleteFinalized(ctx, sv, k, newRev, obj); err != nil {
			return nil, nil, err
		}
	}
	return obj, body, nil
}

// deleteFinalized deletes obj, stored under k at rev, marked deleted and
// just updated to have no finalizers left: the object goes. The update is
// committed, so the delete must not depend on the caller still waiting (a
// controller stopped by a hot swap, a client that hung up); should it not
// happen at all (a crash in between), the garbage collector finishes the
// deletion (FinishDeletion). A write since (a conflict) or a delete since
// leaves it to whoever made them.
func (s *Service) deleteFinalized(ctx context.Context, sv *kinds.Kind, k string, rev int64, obj *unstructured.Unstructured) error {
	_, _, err := s.store.Delete(context.WithoutCancel(ctx), k, rev)
	switch {
	case err == nil:
		if h := hooksOf(sv); h != nil {
			h.committed(ctx, s, nil, obj.Object)
		}
		return nil
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return nil
	}
	return storeError(err, sv.GVR.GroupResource(), obj.GetName())
}

// mutateAndCoerce runs mutating admission, puts back the server-owned
// metadata (systemFields) whatever it returned and, when it changed obj
// (already coerced by the caller), defaults and prunes what it returned.
// The check is exact (objjson.DeepEqual, so an int64 turned into a float64 counts
// as a change) and costs a copy of obj, a fraction of a coercion, taken
// only when the admission chain may change obj (see Admitter).
func (s *Service) mutateAndCoerce(ctx context.Context, sv *kinds.Kind, req *AdmissionRequest, obj *unstructured.Unstructured) error {
	a := s.admitter()
	if a == nil {
		return nil
	}
	name, ns := obj.GetName(), obj.GetNamespace()
	// Until changing is called obj is as it was: nothing to put back or
	// compare. (One variable, so that the closure moves one to the heap.)
	var was struct {
		obj *unstructured.Unstructured
		sys systemMeta
	}
	changing := func() {
		if was.obj == nil {
			was.obj, was.sys = obj.DeepCopy(), systemMetaOf(obj)
		}
	}
	if err := mutate(ctx, a, req, changing); err != nil {
		return err
	}
	if obj.GetName() != name || obj.GetNamespace() != ns {
		return apierrors.NewInternalError(fmt.Errorf("mutating admission changed the name or namespace of %s/%s", ns, name))
	}
	if was.obj == nil {
		return nil
	}
	was.sys.restore(obj)
	if objjson.DeepEqual(was.obj.Object, obj.Object) {
		return nil // unchanged: already coerced
	}
	objjson.NormalizeNumbers(obj.Object)
	_, err := sv.Coerce(obj)
	return err
}

// coerce is sv.Coerce, or sv.CoerceBuilt for an object the server built in
// its kind's stored shape (kinds.WithBuiltShape). A mutating admission
// that changes it is followed by the whole Coerce (mutateAndCoerce).
func coerce(ctx context.Context, sv *kinds.Kind, obj *unstructured.Unstructured) ([]string, error) {
	if kinds.BuiltShape(ctx) {
		return sv.CoerceBuilt(obj)
	}
	return sv.Coerce(obj)
}

// terminating tells whether a stored document carries a deletionTimestamp.
// Documents are written by Kind.Encode, whose metadata has only known keys
// spelled as they are and no escaped letters: one without the key needs no
// decoding.
func terminating(doc []byte) bool {
	if !bytes.Contains(doc, []byte(`"deletionTimestamp"`)) {
		return false
	}
	// Keys matched exactly, as the engine reads them (see exactStoredMeta).
	m, ok := scanStoredMeta(doc)
	if !ok {
		m, _ = exactStoredMeta(doc)
	}
	return m.Deleting()
}

// staleStored reports whether the store read kv through an encryption key
// that no longer writes (store/encrypt): writing it unchanged re-encrypts
// it, as Kubernetes does for a stale read.
func (s *Service) staleStored(kv *store.KeyValue) bool {
	st, ok := s.store.(interface {
		Stale(key string, rev int64) bool
	})
	return ok && st.Stale(kv.Key, kv.ModRevision)
}
