package apiserver

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// listConverted serves a full list (no limit) that the client asked for as
// a Table or as PartialObjectMetadata: it reads the objects a page at a time
// (s.pageSize) at the revision of the first page, and keeps of each page
// only what the answer holds (the rows, or the metadata), so that such a
// list never holds every decoded object of the kind at once. The answer is
// what converting the whole list at once gives.
func (s *Server) listConverted(w http.ResponseWriter, r *http.Request, t target, opts metav1.ListOptions) error {
	partial := wantsPartial(r)
	var tbl *metav1.Table
	var items []any
	rv := ""
	opts.Limit = s.pageSize
	for {
		page, err := s.eng.List(r.Context(), t.gvr(), t.namespace, opts)
		if err != nil {
			return err
		}
		next := page.GetContinue()
		page.SetContinue("")
		if rv == "" {
			rv = page.GetResourceVersion()
		}
		if partial {
			for i := range page.Items {
				items = append(items, partialMetadata(&page.Items[i]).(*unstructured.Unstructured).Object)
			}
		} else {
			pt, err := s.table(r, t, page)
			if err != nil {
				return err
			}
			if tbl == nil {
				tbl = pt
			} else {
				tbl.Rows = append(tbl.Rows, pt.Rows...)
			}
		}
		if next == "" {
			break
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
	}
	if partial {
		if items == nil {
			items = []any{}
		}
		writeObject(w, r, http.StatusOK, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
			"metadata": map[string]any{"resourceVersion": rv}, "items": items,
		}})
		return nil
	}
	tbl.ResourceVersion, tbl.Continue = rv, ""
	writeObject(w, r, http.StatusOK, tbl)
	return nil
}
