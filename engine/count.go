package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// countPage is how many selected documents one read of CountSelected
// returns: what it holds in memory at a time.
const countPage = 1000

// CountSelected returns how many stored objects of gvr, in every namespace,
// have labels sel selects, at the current revision. It returns no objects
// and decodes none: it reads each document's metadata.labels and steps over
// the rest, which is what a count over a kind of many objects (a quota's)
// needs. A document it cannot walk is decoded as the engine decodes
// documents. An unserved gvr gives the NotFound a List gives.
func (s *Service) CountSelected(ctx context.Context, gvr schema.GroupVersionResource, sel labels.Selector) (int, error) {
	sv, err := s.lookup(gvr, "", true)
	if err != nil {
		return 0, err
	}
	gr := sv.StoredGroupResource()
	opts := store.ListOptions{Limit: countPage}
	if !sel.Empty() {
		opts.Filter = func(_ string, value []byte) bool { return sel.Matches(storedLabels(value)) }
	} else {
		opts.KeysOnly = true
	}
	n := 0
	_, err = store.ListPages(ctx, s.store, store.ResourcePrefix(gr.Group, gr.Resource, ""), opts, func(items []store.KeyValue) error {
		n += len(items)
		return nil
	})
	if err != nil {
		return 0, storeError(err, gvr.GroupResource(), "")
	}
	return n, nil
}

// storedLabels reads the labels of a stored document.
func storedLabels(b []byte) labels.Labels {
	if m, ok := scanSelectable(b); ok {
		return m.labels
	}
	doc, err := kinds.DecodeMap(b)
	if err != nil {
		return labels.Set(nil)
	}
	return labels.Set((&unstructured.Unstructured{Object: doc}).GetLabels())
}

// labelPairs are the labels of one document in the order it holds them,
// a labels.Labels that costs no map.
type labelPairs []string // key, value, key, value, ...

func (p labelPairs) Lookup(label string) (string, bool) {
	for i := len(p) - 2; i >= 0; i -= 2 { // the last of duplicate keys wins
		if p[i] == label {
			return p[i+1], true
		}
	}
	return "", false
}

func (p labelPairs) Has(label string) bool {
	_, ok := p.Lookup(label)
	return ok
}

func (p labelPairs) Get(label string) string {
	v, _ := p.Lookup(label)
	return v
}

// selectable is what label selectors and the metadata field selectors read
// of a document.
type selectable struct {
	name, namespace string
	labels          labelPairs
}

// scanSelectable reads metadata.name, metadata.namespace and
// metadata.labels from a JSON object without decoding the rest; false when
// the document is not one it handles (a label value that is not a string,
// say). Keys are matched exactly and the last of duplicates wins, as the
// engine's decoding has it.
func scanSelectable(b []byte) (selectable, bool) {
	var m selectable
	d := objjson.NewScanner(b)
	ok := d.Object(func(k string) bool {
		if k != "metadata" {
			return d.Skip()
		}
		m = selectable{labels: m.labels[:0]} // a later "metadata" replaces an earlier one
		return d.Object(func(k string) bool {
			switch k {
			case "name":
				return scanString(d, &m.name)
			case "namespace":
				return scanString(d, &m.namespace)
			case "labels":
			default:
				return d.Skip()
			}
			raw, ok := d.Raw()
			if !ok {
				return false
			}
			m.labels = m.labels[:0]
			if string(raw) == "null" {
				return true
			}
			ld := objjson.NewScanner(raw)
			return ld.Object(func(k string) bool {
				v, ok := ld.String()
				m.labels = append(m.labels, k, v)
				return ok
			}) && ld.Done()
		})
	})
	return m, ok && d.Done()
}

// scanString reads a string, or null as "" as the engine's decoding of
// metadata does.
func scanString(d *objjson.Scanner, into *string) bool {
	raw, ok := d.Raw()
	if !ok {
		return false
	}
	if string(raw) == "null" {
		*into = ""
		return true
	}
	*into, ok = objjson.NewScanner(raw).String()
	return ok
}
