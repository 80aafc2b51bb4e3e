package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apiserver/pkg/warning"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// target is what a resource path names.
type target struct {
	res       kinds.Resource
	namespace string
	name      string
	sub       string
}

func (t target) gvr() schema.GroupVersionResource { return t.res.GVR }

// parseTarget parses the part of a resource path after /api/v1 or
// /apis/{group}/{version}.
func (s *Server) parseTarget(gv schema.GroupVersion, rest string) (target, error) {
	var t target
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	for _, sg := range segs {
		if sg == "" {
			return t, apierrors.NewNotFound(schema.GroupResource{}, rest)
		}
	}
	namespaced := false
	if segs[0] == "namespaces" && len(segs) >= 3 && !(gv.Group == "" && (segs[2] == "status" || segs[2] == "finalize")) {
		t.namespace, segs, namespaced = segs[1], segs[2:], true
	}
	res, ok := s.eng.Resource(gv.WithResource(segs[0]))
	if !ok || len(segs) > 3 || (namespaced && !res.Namespaced) {
		return t, notFoundResource()
	}
	t.res = res
	if len(segs) > 1 {
		t.name = segs[1]
		if res.Namespaced && !namespaced {
			return t, notFoundResource()
		}
	}
	if len(segs) > 2 {
		t.sub = segs[2]
		if !(t.sub == "status" && res.Status) && !(t.sub == "scale" && res.Scale) && !(t.sub == "finalize" && finalizable(res)) {
			if !res.Builtin {
				// As kube-apiserver's custom resource handler answers
				// a subresource the CRD does not have.
				return t, apierrors.NewNotFound(res.GVR.GroupResource(), t.name)
			}
			return t, notFoundResource()
		}
	}
	return t, nil
}

// notFoundResource is the answer for a path that names no served
// resource: kube-apiserver's not-found handler's, which names nothing.
func notFoundResource() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{},
	}}
}

func requestGV(r *http.Request) schema.GroupVersion {
	return schema.GroupVersion{Group: chi.URLParam(r, "group"), Version: chi.URLParam(r, "version")}
}

func methodNotAllowed(r *http.Request) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method)
}

// decodeParams decodes query parameters into one of the meta/v1 option types.
func decodeParams(r *http.Request, into runtime.Object) error {
	if err := metainternalscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, into); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid query parameters: %v", err))
	}
	return nil
}

// serveResource serves every verb on resource paths.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	gv := requestGV(r)
	if gv.Group == "" && gv.Version != "v1" {
		writeError(w, notFoundResource())
		return
	}
	t, err := s.parseTarget(gv, chi.URLParam(r, "*"))
	if err != nil {
		writeError(w, err)
		return
	}
	serving.MarkServed(r.Context())
	if err := negotiate(r); err != nil {
		writeError(w, err)
		return
	}
	if t.res.DeprecationWarning != "" {
		warning.AddWarning(r.Context(), "", t.res.DeprecationWarning)
	}
	if err := s.dispatch(w, r, t); err != nil {
		writeError(w, err)
	}
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, t target) error {
	switch {
	case t.name == "":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return s.list(w, r, t)
		case http.MethodPost:
			return s.create(w, r, t)
		case http.MethodDelete:
			return s.deleteCollection(w, r, t)
		}
	case t.sub == "finalize": // update only, as in Kubernetes
		if r.Method == http.MethodPut {
			return s.update(w, r, t)
		}
		// kube-apiserver's router answers the other methods.
		return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
	case t.sub == "scale":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			sc, err := s.eng.GetScale(r.Context(), t.gvr(), t.namespace, t.name)
			if err != nil {
				return err
			}
			writeObject(w, r, http.StatusOK, sc)
			return nil
		case http.MethodPut:
			return s.update(w, r, t)
		case http.MethodPatch:
			return s.patch(w, r, t)
		}
	default:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return s.get(w, r, t)
		case http.MethodPut:
			return s.update(w, r, t)
		case http.MethodPatch:
			return s.patch(w, r, t)
		case http.MethodDelete:
			if t.sub != "" {
				return methodNotAllowed(r)
			}
			return s.delete(w, r, t)
		}
	}
	return methodNotAllowed(r)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, t target) error {
	var opts metav1.GetOptions
	if err := decodeParams(r, &opts); err != nil {
		return err
	}
	obj, err := s.eng.Get(r.Context(), t.gvr(), t.namespace, t.name, opts)
	if err != nil {
		return err
	}
	return s.respond(w, r, t, http.StatusOK, obj)
}

// validListOptions refuses, as kube-apiserver does (422 Invalid), the
// combinations of list and watch options it refuses: resourceVersionMatch
// on a watch without sendInitialEvents, sendInitialEvents without
// resourceVersionMatch=NotOlderThan or on a list, resourceVersionMatch
// without resourceVersion or with continue, among others. Served, they
// would be answered with something other than what they ask for (the
// current objects for resourceVersionMatch=Exact, for one).
func validListOptions(opts *metav1.ListOptions) error {
	// The fields the validation reads; the selectors are parsed later.
	in := metainternalversion.ListOptions{
		Watch:                opts.Watch,
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		SendInitialEvents:    opts.SendInitialEvents,
		Continue:             opts.Continue,
	}
	// Setpoint serves sendInitialEvents: the WatchList feature is on.
	if errs := metainternalvalidation.ValidateListOptions(&in, true); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, t target) error {
	var opts metav1.ListOptions
	if err := decodeParams(r, &opts); err != nil {
		return err
	}
	if err := validListOptions(&opts); err != nil {
		return err
	}
	if opts.Watch {
		return s.watch(w, r, t, opts)
	}
	if !wantsPartial(r) && acceptParams(r, "Table") == nil && !wantsYAML(r) {
		if opts.Limit == 0 {
			return s.streamJSONList(w, r, t, opts)
		}
		l, err := s.eng.ListJSON(r.Context(), t.gvr(), t.namespace, opts)
		if err != nil {
			return err
		}
		writeJSONList(w, l)
		return nil
	}
	if opts.Limit == 0 && (wantsPartial(r) || acceptParams(r, "Table") != nil) {
		return s.listConverted(w, r, t, opts)
	}
	l, err := s.eng.List(r.Context(), t.gvr(), t.namespace, opts)
	if err != nil {
		return err
	}
	return s.respond(w, r, t, http.StatusOK, l)
}

// respond writes an object or list, as a Table or as partial object
// metadata when the client asks for one.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, t target, code int, obj runtime.Object) error {
	if wantsPartial(r) {
		writeObject(w, r, code, partialMetadata(obj))
		return nil
	}
	if acceptParams(r, "Table") == nil {
		writeObject(w, r, code, obj)
		return nil
	}
	tbl, err := s.table(r, t, obj)
	if err != nil {
		return err
	}
	writeObject(w, r, code, tbl)
	return nil
}

// respondJSON is respond for a written object whose JSON the engine
// returned (nil when it did not): a client that asks for plain JSON gets
// those bytes as they are.
func (s *Server) respondJSON(w http.ResponseWriter, r *http.Request, t target, code int, obj *unstructured.Unstructured, body []byte) error {
	if body == nil || wantsPartial(r) || acceptParams(r, "Table") != nil || wantsYAML(r) {
		return s.respond(w, r, t, code, obj)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
	return nil
}

// table renders obj as a meta/v1 Table, honouring includeObject.
func (s *Server) table(r *http.Request, t target, obj runtime.Object) (*metav1.Table, error) {
	var topts metav1.TableOptions
	if err := decodeParams(r, &topts); err != nil {
		return nil, err
	}
	switch topts.IncludeObject {
	case "", metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		// kube-apiserver's words; rows of whole objects would be an
		// answer to includeObject=Object.
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", topts.IncludeObject))
	}
	tbl, err := s.eng.ConvertToTable(r.Context(), t.gvr(), obj, &topts)
	if err != nil {
		return nil, err
	}
	tbl.Kind, tbl.APIVersion = "Table", "meta.k8s.io/v1"
	if l, ok := obj.(*unstructured.UnstructuredList); ok {
		tbl.ResourceVersion, tbl.Continue = l.GetResourceVersion(), l.GetContinue()
	} else if u, ok := obj.(*unstructured.Unstructured); ok {
		tbl.ResourceVersion = u.GetResourceVersion()
	}
	for i := range tbl.Rows {
		row := &tbl.Rows[i]
		if topts.IncludeObject == metav1.IncludeNone || row.Object.Object == nil {
			row.Object = runtime.RawExtension{}
			continue
		}
		u, ok := row.Object.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if topts.IncludeObject == metav1.IncludeMetadata || topts.IncludeObject == "" {
			pm := map[string]any{
				"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
				"metadata": u.Object["metadata"],
			}
			u = &unstructured.Unstructured{Object: pm}
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		row.Object = runtime.RawExtension{Raw: b}
	}
	return tbl, nil
}

func (s *Server) readObject(w http.ResponseWriter, r *http.Request, t target) (*unstructured.Unstructured, error) {
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	obj, err := decodeObject(r, body)
	if err != nil {
		return nil, err
	}
	if t.sub == "scale" {
		return obj, nil
	}
	if t.res.Namespaced {
		ns := obj.GetNamespace()
		if ns != "" && ns != t.namespace {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ns, t.namespace))
		}
		if ns == "" { // otherwise it holds t.namespace already
			obj.SetNamespace(t.namespace)
		}
	}
	if t.name != "" && obj.GetName() != t.name {
		if obj.GetName() == "" {
			obj.SetName(t.name)
		} else {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), t.name))
		}
	}
	return obj, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, t target) error {
	var opts metav1.CreateOptions
	if err := decodeParams(r, &opts); err != nil {
		return err
	}
	obj, err := s.readObject(w, r, t)
	if err != nil {
		return err
	}
	opts.FieldManager = fieldManager(r, opts.FieldManager)
	out, body, err := s.eng.CreateJSON(r.Context(), t.gvr(), obj, opts)
	if err != nil {
		return err
	}
	return s.respondJSON(w, r, t, http.StatusCreated, out, body)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, t target) error {
	var opts metav1.UpdateOptions
	if err := decodeParams(r, &opts); err != nil {
		return err
	}
	obj, err := s.readObject(w, r, t)
	if err != nil {
		return err
	}
	opts.FieldManager = fieldManager(r, opts.FieldManager)
	var out *unstructured.Unstructured
	var body []byte
	switch t.sub {
	case "status":
		out, body, err = s.eng.UpdateStatusJSON(r.Context(), t.gvr(), obj, opts)
	case "scale":
		out, err = s.eng.UpdateScale(r.Context(), t.gvr(), t.namespace, t.name, obj, opts)
	case "finalize":
		out, body, err = s.eng.UpdateFinalizeJSON(r.Context(), obj, opts)
	default:
		out, body, err = s.eng.UpdateJSON(r.Context(), t.gvr(), obj, opts)
	}
	if err != nil {
		return err
	}
	return s.respondJSON(w, r, t, http.StatusOK, out, body)
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, t target) error {
	var opts metav1.PatchOptions
	if err := decodeParams(r, &opts); err != nil {
		return err
	}
	mt := mediaType(r)
	pt := types.PatchType(mt)
	switch pt {
	case types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
	default:
		return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", t.gvr().GroupResource(), t.name,
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got %q)", mt), 0, false)
	}
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var subs []string
	if t.sub != "" {
		subs = []string{t.sub}
	}
	if pt == types.ApplyYAMLPatchType {
		// The applied configuration is YAML (JSON included); the engine
		// takes it as JSON. fieldManager is required, not defaulted.
		j, err := toJSON(mt, body)
		if err != nil {
			return err
		}
		ctx := engine.WithCreateCheck(r.Context(), s.mayCreate(r, t))
		out, created, err := s.eng.Apply(ctx, t.gvr(), t.namespace, t.name, j, opts, subs...)
		if err != nil {
			return err
		}
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		return s.respond(w, r, t, code, out)
	}
	if err := checkJSONDepth(body); err != nil {
		return err
	}
	opts.FieldManager = fieldManager(r, opts.FieldManager)
	out, err := s.eng.Patch(r.Context(), t.gvr(), t.namespace, t.name, pt, body, opts, subs...)
	if err != nil {
		return err
	}
	return s.respond(w, r, t, http.StatusOK, out)
}

// fieldManager is the manager a write records in managedFields: the
// fieldManager parameter, or else, as in Kubernetes, the User-Agent's
// prefix.
func fieldManager(r *http.Request, param string) string {
	if param != "" {
		return param
	}
	return kinds.ManagerFromUserAgent(r.UserAgent())
}

// deleteOptions reads DeleteOptions from the body, or else the query.
func (s *Server) deleteOptions(w http.ResponseWriter, r *http.Request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if err := decodeParams(r, &opts); err != nil {
		return opts, err
	}
	body, err := readBody(w, r, s.opts.MaxBodyBytes)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return opts, err
	}
	var fromBody metav1.DeleteOptions
	if mediaType(r) == protobufType {
		m, err := decodeProtobuf(body)
		if err == nil {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &fromBody)
		}
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid DeleteOptions: %v", err))
		}
		return fromBody, nil
	}
	j, err := toJSON(mediaType(r), body)
	if err != nil {
		return opts, err
	}
	if err := utiljson.Unmarshal(j, &fromBody); err != nil {
		return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid DeleteOptions: %v", err))
	}
	return fromBody, nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, t target) error {
	opts, err := s.deleteOptions(w, r)
	if err != nil {
		return err
	}
	obj, deleted, err := s.eng.DeleteObject(r.Context(), t.gvr(), t.namespace, t.name, opts)
	if err != nil {
		return err
	}
	if !deleted {
		writeObject(w, r, http.StatusOK, obj)
		return nil
	}
	writeObject(w, r, http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name: t.name, Group: t.res.GVR.Group, Kind: t.res.GVR.Resource, UID: obj.GetUID(),
		},
	})
	return nil
}

func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request, t target) error {
	var lopts metav1.ListOptions
	if err := decodeParams(r, &lopts); err != nil {
		return err
	}
	if err := validListOptions(&lopts); err != nil {
		return err
	}
	dopts, err := s.deleteOptions(w, r)
	if err != nil {
		return err
	}
	l, err := s.eng.DeleteCollection(r.Context(), t.gvr(), t.namespace, dopts, lopts)
	if err != nil {
		return err
	}
	writeObject(w, r, http.StatusOK, l)
	return nil
}

// wantsPartial tells whether the client (a client-go metadata client, for
// instance) asked for PartialObjectMetadata.
func wantsPartial(r *http.Request) bool {
	for _, as := range []string{"PartialObjectMetadata", "PartialObjectMetadataList"} {
		if p := acceptParams(r, as); p != nil && p["g"] == "meta.k8s.io" && p["v"] == "v1" {
			return true
		}
	}
	return false
}

// partialMetadata reduces an object to a PartialObjectMetadata and a list to
// a PartialObjectMetadataList; other objects are returned as they are.
func partialMetadata(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": o.Object["metadata"],
		}}
	case *unstructured.UnstructuredList:
		items := make([]any, 0, len(o.Items))
		for i := range o.Items {
			items = append(items, partialMetadata(&o.Items[i]).(*unstructured.Unstructured).Object)
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
			"metadata": o.Object["metadata"], "items": items,
		}}
	}
	return obj
}
