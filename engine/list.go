package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
}

// eventFields are the field selectors Events take besides metadata ones,
// as `kubectl describe` uses them.
var eventFields = map[string][]string{
	"involvedObject.kind":            {"involvedObject", "kind"},
	"involvedObject.namespace":       {"involvedObject", "namespace"},
	"involvedObject.name":            {"involvedObject", "name"},
	"involvedObject.uid":             {"involvedObject", "uid"},
	"involvedObject.apiVersion":      {"involvedObject", "apiVersion"},
	"involvedObject.resourceVersion": {"involvedObject", "resourceVersion"},
	"involvedObject.fieldPath":       {"involvedObject", "fieldPath"},
	"reason":                         {"reason"},
	"type":                           {"type"},
	"source":                         {"source", "component"},
}

func parseSelector(gvr schema.GroupVersionResource, labelSel, fieldSel string) (*selector, error) {
	ls, err := labels.Parse(labelSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid label selector %q: %v", labelSel, err))
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %q: %v", fieldSel, err))
	}
	sel := &selector{labels: ls, fields: fs}
	for _, r := range fs.Requirements() {
		var path []string
		switch {
		case r.Field == "metadata.name" || r.Field == "metadata.namespace":
			continue
		case gvr == EventResource && eventFields[r.Field] != nil:
			path = eventFields[r.Field]
		case gvr == NamespaceResource && r.Field == "status.phase":
			// As Kubernetes' field label conversions for namespaces allow.
			path = []string{"status", "phase"}
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
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

// metaOnly is what a shallow filter decodes of a stored document.
type metaOnly struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// filter returns the store filter of sel, or nil when it selects everything.
func (sel *selector) filter() func(string, []byte) bool {
	if sel.empty() {
		return nil
	}
	return func(_ string, value []byte) bool {
		if sel.paths != nil {
			var m map[string]any
			if json.Unmarshal(value, &m) != nil {
				return false
			}
			return sel.matches(m)
		}
		var m metaOnly
		if json.Unmarshal(value, &m) != nil {
			return false
		}
		if !sel.labels.Matches(labels.Set(m.Metadata.Labels)) {
			return false
		}
		return sel.fields.Matches(fields.Set{"metadata.name": m.Metadata.Name, "metadata.namespace": m.Metadata.Namespace})
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
		u, err := decode(sv, &res.Items[i])
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *u)
	}
	return list, nil
}

// listStored reads the stored documents List returns.
func (s *Service) listStored(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*served, *store.ListResult, error) {
	sv, err := s.lookup(gvr, namespace, true)
	if err != nil {
		return nil, nil, err
	}
	sel, err := parseSelector(gvr, opts.LabelSelector, opts.FieldSelector)
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
	res, err := s.store.List(ctx, store.ResourcePrefix(gvr.Group, gvr.Resource, namespace), store.ListOptions{
		Revision: rev, Limit: opts.Limit, Continue: opts.Continue, Filter: sel.filter(),
	})
	if err != nil {
		return nil, nil, storeError(err, gvr.GroupResource(), "")
	}
	return sv, res, nil
}
