package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/store"
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
// without decoding and re-encoding them; others go through decode.
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
	prefix := sv.storedPrefix()
	for i := range res.Items {
		b, err := itemJSON(sv, prefix, &res.Items[i])
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, b)
	}
	return out, nil
}

// storedPrefix is how a document stored by encode at sv's version begins:
// encode writes compact JSON with sorted keys, so apiVersion, kind and
// metadata come first.
func storedPrefix(sv *served) []byte {
	gv, _ := json.Marshal(sv.GVR.GroupVersion().String())
	kind, _ := json.Marshal(sv.Kind)
	p := append([]byte(`{"apiVersion":`), gv...)
	p = append(p, `,"kind":`...)
	p = append(p, kind...)
	return append(p, `,"metadata":{`...)
}

// storedPrefix returns sv.prefix, computing it when sv was built without.
func (sv *served) storedPrefix() []byte {
	if sv.prefix != nil {
		return sv.prefix
	}
	return storedPrefix(sv)
}

var resourceVersionField = []byte(`"resourceVersion"`)

// itemJSON returns kv as served at sv's version with its resourceVersion.
// When the document starts with prefix, is valid JSON, has no
// resourceVersion of its own and reads as stored (readSchemas), it inserts
// "resourceVersion" first in metadata; otherwise it decodes and re-encodes.
func itemJSON(sv *served, prefix []byte, kv *store.KeyValue) ([]byte, error) {
	v := bytes.TrimRight(kv.Value, " \t\r\n")
	if !sv.read.stale(kv.ModRevision) && bytes.HasPrefix(v, prefix) && !bytes.Contains(v, resourceVersionField) && json.Valid(v) {
		rest := v[len(prefix):]
		b := make([]byte, 0, len(v)+32)
		b = append(b, prefix...)
		b = append(b, `"resourceVersion":"`...)
		b = strconv.AppendInt(b, kv.ModRevision, 10)
		b = append(b, '"')
		if rest[0] != '}' {
			b = append(b, ',')
		}
		return append(b, rest...), nil
	}
	u, err := decode(sv, kv)
	if err != nil {
		return nil, err
	}
	b, err := MarshalJSON(u)
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(b, "\n"), nil
}

// servedJSON returns a document stored by encode for sv, at revision rev, as
// the API serves it: with "resourceVersion" inserted first in metadata. It
// returns nil when the document does not begin as encode writes one at sv's
// version (the caller then encodes the object itself). encode drops the
// resourceVersion, so the document has none of its own.
func servedJSON(sv *served, stored []byte, rev int64) []byte {
	prefix := sv.storedPrefix()
	v := bytes.TrimRight(stored, " \t\r\n")
	if !bytes.HasPrefix(v, prefix) || len(v) == len(prefix) {
		return nil
	}
	rest := v[len(prefix):]
	b := make([]byte, 0, len(v)+32)
	b = append(b, prefix...)
	b = append(b, `"resourceVersion":"`...)
	b = strconv.AppendInt(b, rev, 10)
	b = append(b, '"')
	if rest[0] != '}' {
		b = append(b, ',')
	}
	return append(b, rest...)
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
