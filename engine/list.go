package engine

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// selector is a parsed label and field selector.
type selector struct {
	labels labels.Selector
	fields fields.Selector
	// paths are the fields other than metadata.name and metadata.namespace
	// the field selector reads, by field label: each one's path in the
	// object. When there are any, the store filter decodes whole documents.
	paths map[string][]string
	// attrs, set when the field selector reads selectable fields of a custom
	// resource (its CRD version's selectableFields), returns an object's
	// fields as the custom resource strategy gives them (GetAttrs). The
	// store filter then decodes whole documents and reads them as reads do
	// (sv's read schemas), since a selectable field may be defaulted.
	attrs func(runtime.Object) (labels.Set, fields.Set, error)
	sv    *kinds.Kind
}

// deep tells whether the selector reads more of an object than metadata.
func (sel *selector) deep() bool { return sel.paths != nil || sel.attrs != nil }

// parseSelector parses the label and field selectors of a list or watch of
// sv. Field selectors may read metadata.name and metadata.namespace of every
// kind, the fields Kubernetes allows for Events and Namespaces, and the
// selectable fields a CRD declares for the served version of its kind.
func parseSelector(sv *kinds.Kind, labelSel, fieldSel string) (*selector, error) {
	ls, err := labels.Parse(labelSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	sel := &selector{labels: ls, fields: fs, sv: sv}
	for _, r := range fs.Requirements() {
		if r.Field == "metadata.name" || r.Field == "metadata.namespace" {
			continue
		}
		path, attrs, ok := sv.FieldLabel(r.Field)
		if !ok {
			return nil, apierrors.NewBadRequest(sv.FieldLabelError(r.Field))
		}
		if attrs != nil {
			sel.attrs = attrs
			continue
		}
		if sel.paths == nil {
			sel.paths = map[string][]string{}
		}
		sel.paths[r.Field] = path
	}
	return sel, nil
}

func (sel *selector) empty() bool {
	return sel == nil || (sel.labels.Empty() && sel.fields.Empty())
}

// matches reports whether an object (as a map) is selected.
func (sel *selector) matches(obj map[string]any) bool {
	if sel.empty() {
		return true
	}
	u := unstructured.Unstructured{Object: obj}
	if !sel.labels.Matches(labels.Set(u.GetLabels())) {
		return false
	}
	if sel.fields.Empty() {
		return true
	}
	set := fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}
	if sel.attrs != nil {
		_, fs, err := sel.attrs(&u)
		if err != nil {
			return false
		}
		for f, v := range fs {
			set[f] = v
		}
	}
	for f, path := range sel.paths {
		v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
		set[f] = fmt.Sprint(valueOrEmpty(v))
	}
	return sel.fields.Matches(set)
}

func valueOrEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// filter returns the store filter of sel, or nil when it selects everything.
func (sel *selector) filter() func(string, []byte) bool {
	if sel.empty() {
		return nil
	}
	return func(_ string, value []byte) bool {
		if !sel.deep() {
			// The metadata the selectors read, keys matched exactly as
			// Decode and a watch's filter match them; a document the scan
			// does not handle is decoded.
			if m, ok := scanSelectable(value); ok {
				return sel.labels.Matches(m.labels) &&
					sel.fields.Matches(fields.Set{"metadata.name": m.name, "metadata.namespace": m.namespace})
			}
		}
		m, err := kinds.DecodeMap(value)
		if err != nil {
			return false
		}
		// The fields as served at the listed version (a view of another
		// kind's objects reads them converted).
		if m, err = sel.sv.FromStored(m); err != nil {
			return false
		}
		if sel.attrs != nil {
			// As Decode reads a document stored before a schema change
			// (which may default a selectable field); a document written
			// since reads the same.
			sel.sv.ApplyReadSchema(m)
		}
		return sel.matches(m)
	}
}

// listRevision resolves resourceVersion and resourceVersionMatch of a list
// to the store revision to read at (0: current).
func (s *Service) listRevision(ctx context.Context, opts metav1.ListOptions) (int64, error) {
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return 0, err
	}
	switch opts.ResourceVersionMatch {
	case "":
	case metav1.ResourceVersionMatchExact:
		if rv == 0 {
			return 0, apierrors.NewBadRequest("resourceVersionMatch=Exact requires a non-zero resourceVersion")
		}
		if opts.Continue != "" {
			return 0, apierrors.NewBadRequest("resourceVersionMatch is forbidden with continue")
		}
		return rv, nil
	case metav1.ResourceVersionMatchNotOlderThan:
		if opts.ResourceVersion == "" {
			return 0, apierrors.NewBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
		}
	default:
		return 0, apierrors.NewBadRequest(fmt.Sprintf("unknown resourceVersionMatch %q", opts.ResourceVersionMatch))
	}
	if opts.Continue != "" && rv != 0 {
		return 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	return 0, s.notOlderThan(ctx, rv)
}

// List returns the objects of gvr in namespace ("" for all namespaces or a
// cluster-scoped resource) that the selectors in opts select, one page when
// opts.Limit is set. Every page of a continued list is read at the revision
// of the first.
func (s *Service) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	sv, res, err := s.listStored(ctx, gvr, namespace, opts)
	if err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion(gvr.GroupVersion().String())
	list.SetKind(sv.ListKind)
	list.SetResourceVersion(strconv.FormatInt(res.Revision, 10))
	list.SetContinue(res.Continue)
	list.Items = make([]unstructured.Unstructured, 0, len(res.Items))
	for i := range res.Items {
		u, err := sv.Decode(&res.Items[i])
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *u)
	}
	return list, nil
}

// listStored reads the stored documents List returns.
func (s *Service) listStored(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*kinds.Kind, *store.ListResult, error) {
	sv, err := s.lookup(gvr, namespace, true)
	if err != nil {
		return nil, nil, err
	}
	sel, err := parseSelector(sv, opts.LabelSelector, opts.FieldSelector)
	if err != nil {
		return nil, nil, err
	}
	rev, err := s.listRevision(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.Limit < 0 {
		return nil, nil, apierrors.NewBadRequest("limit must not be negative")
	}
	gr := sv.StoredGroupResource()
	res, err := s.store.List(ctx, store.ResourcePrefix(gr.Group, gr.Resource, namespace), store.ListOptions{
		Revision: rev, Limit: opts.Limit, Continue: opts.Continue, Filter: sel.filter(),
	})
	if err != nil {
		return nil, nil, storeError(err, gvr.GroupResource(), "")
	}
	return sv, res, nil
}
