package engine

import (
	"context"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// JSONList is a page of a list whose items are JSON documents, for callers
// that only write the list out.
type JSONList struct {
	APIVersion      string
	Kind            string
	ResourceVersion string
	Continue        string
	// Items are the objects as JSON, each what MarshalJSON of the
	// corresponding item of List gives, up to the order of keys.
	Items [][]byte
}

// ListJSON is List with the items as JSON. Stored documents already at the
// served version are passed through with their resourceVersion spliced in,
// without decoding and re-encoding them (Kind.ItemJSON); others are decoded.
func (s *Service) ListJSON(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*JSONList, error) {
	sv, res, err := s.listStored(ctx, gvr, namespace, opts)
	if err != nil {
		return nil, err
	}
	out := &JSONList{
		APIVersion:      gvr.GroupVersion().String(),
		Kind:            sv.ListKind,
		ResourceVersion: strconv.FormatInt(res.Revision, 10),
		Continue:        res.Continue,
		Items:           make([][]byte, 0, len(res.Items)),
	}
	for i := range res.Items {
		b, err := sv.ItemJSON(&res.Items[i])
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, b)
	}
	return out, nil
}

// ListJSONPageSize is the most objects ListJSONPages reads at a time: what
// kubectl and client-go ask for per page.
const ListJSONPageSize = 500

// listJSONPageBytes is about how many bytes of objects ListJSONPages reads
// at a time by default: a page of 500 objects of 1.5 MiB would be 750 MiB.
const listJSONPageBytes int64 = 4 << 20

// ListJSONPages is ListJSON for a list the caller writes out as it goes: it
// reads the list in pages at the revision of the first and hands each to fn,
// which must not keep its items. A page holds at most pageSize objects
// (ListJSONPageSize when 0) and, after the first, about 4 MiB of them, as
// the size of the objects read so far predicts; the first holds at most 50.
// A list with a limit of its own is one page, as ListJSON returns it. So a
// full list of a large kind holds one page at a time rather than the whole
// kind twice over (stored and encoded). An error after the first page means
// the pages fn got are not the whole list.
func (s *Service) ListJSONPages(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions, pageSize int64, fn func(*JSONList) error) error {
	if pageSize <= 0 {
		pageSize = ListJSONPageSize
	}
	if opts.Limit != 0 {
		l, err := s.ListJSON(ctx, gvr, namespace, opts)
		if err != nil {
			return err
		}
		return fn(l)
	}
	opts.Limit = min(pageSize, 50)
	var items, bytes int64
	for {
		l, err := s.ListJSON(ctx, gvr, namespace, opts)
		if err != nil {
			return err
		}
		next := l.Continue
		l.Continue = ""
		for _, it := range l.Items {
			bytes += int64(len(it))
		}
		items += int64(len(l.Items))
		if err := fn(l); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		// Later pages are read at the first one's revision, which the
		// continue token carries.
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
		opts.Limit = pageSize
		if items > 0 && bytes > 0 {
			opts.Limit = min(pageSize, max(1, s.listPageBytes*items/bytes))
		}
	}
}
