package engine

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// A garbage collector's watch decodes the metadata of every write in the
// store, so DecodeStoredMeta reads only what ownership and deletion are
// decided on: it walks the document's bytes, skips everything but metadata
// (spec, status, managedFields, labels and annotations are stepped over by
// bracket matching, never decoded) and builds no map (objjson.Scanner). A
// document it cannot walk is decoded as the engine decodes documents
// (exactStoredMeta).

// StoredMeta is the part of a stored document's metadata that ownership and
// deletion are decided on.
type StoredMeta struct {
	UID               types.UID
	Name              string
	Namespace         string
	OwnerReferences   []metav1.OwnerReference
	Finalizers        []string
	DeletionTimestamp json.RawMessage // as stored; empty or null when absent
}

// Deleting tells whether the document carries a deletionTimestamp.
func (m *StoredMeta) Deleting() bool {
	return len(m.DeletionTimestamp) > 0 && string(m.DeletionTimestamp) != "null"
}

// DecodeStoredMeta decodes the metadata of a stored document; false when the
// value is not an object document with a uid (module bytes, for one).
func DecodeStoredMeta(b []byte) (StoredMeta, bool) {
	if m, ok := scanStoredMeta(b); ok {
		return m, m.UID != ""
	}
	return exactStoredMeta(b)
}

// exactStoredMeta is DecodeStoredMeta through the engine's own decoding: the
// document as a map (the last of duplicate keys kept), its "metadata" member
// and, in it, the members of those exact names, as the engine reads them.
// Keys are matched exactly, never by case as encoding/json matches struct
// fields: a custom resource that keeps unknown fields may hold a "METADATA"
// of the user's, which must not pass for the object's own.
func exactStoredMeta(b []byte) (StoredMeta, bool) {
	doc, err := kinds.DecodeMap(b)
	if err != nil {
		return StoredMeta{}, false
	}
	md, _ := doc["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	m := StoredMeta{UID: types.UID(str(md, "uid")), Name: str(md, "name"), Namespace: str(md, "namespace")}
	if fs, ok := md["finalizers"].([]any); ok {
		for _, f := range fs {
			if s, ok := f.(string); ok {
				m.Finalizers = append(m.Finalizers, s)
			}
		}
	}
	if dt := md["deletionTimestamp"]; dt != nil {
		m.DeletionTimestamp, _ = json.Marshal(dt)
	}
	if refs, ok := md["ownerReferences"].([]any); ok {
		for _, r := range refs {
			rm, ok := r.(map[string]any)
			if !ok {
				continue
			}
			ref := metav1.OwnerReference{APIVersion: str(rm, "apiVersion"), Kind: str(rm, "kind"), Name: str(rm, "name"), UID: types.UID(str(rm, "uid"))}
			if b, ok := rm["blockOwnerDeletion"].(bool); ok {
				ref.BlockOwnerDeletion = &b
			}
			m.OwnerReferences = append(m.OwnerReferences, ref)
		}
	}
	return m, m.UID != ""
}

// scanStoredMeta reads StoredMeta from a JSON object without decoding the
// rest; false when the document is not one it handles (then exactStoredMeta
// decides). Keys are matched exactly; of duplicate keys the last wins, as in
// exactStoredMeta.
func scanStoredMeta(b []byte) (m StoredMeta, ok bool) {
	d := objjson.NewScanner(b)
	str := func(into *string) bool {
		var ok bool
		*into, ok = d.String()
		return ok
	}
	uid := func(into *types.UID) bool {
		s, ok := d.String()
		*into = types.UID(s)
		return ok
	}
	ok = d.Object(func(k string) bool {
		if k != "metadata" {
			return d.Skip()
		}
		m = StoredMeta{} // a later "metadata" replaces an earlier one
		return d.Object(func(k string) bool {
			switch k {
			case "uid":
				return uid(&m.UID)
			case "name":
				return str(&m.Name)
			case "namespace":
				return str(&m.Namespace)
			case "finalizers":
				m.Finalizers = nil
				return d.Array(func() bool {
					var f string
					ok := str(&f)
					m.Finalizers = append(m.Finalizers, f)
					return ok
				})
			case "deletionTimestamp":
				raw, ok := d.Raw()
				m.DeletionTimestamp = json.RawMessage(raw)
				return ok
			case "ownerReferences":
				m.OwnerReferences = nil
				return d.Array(func() bool {
					var r metav1.OwnerReference
					ok := d.Object(func(k string) bool {
						switch k {
						case "apiVersion":
							return str(&r.APIVersion)
						case "kind":
							return str(&r.Kind)
						case "name":
							return str(&r.Name)
						case "uid":
							return uid(&r.UID)
						case "blockOwnerDeletion":
							v, null, ok := d.Bool()
							r.BlockOwnerDeletion = nil
							if !null {
								r.BlockOwnerDeletion = &v
							}
							return ok
						}
						return d.Skip()
					})
					m.OwnerReferences = append(m.OwnerReferences, r)
					return ok
				})
			}
			return d.Skip()
		})
	})
	return m, ok && d.Done()
}
