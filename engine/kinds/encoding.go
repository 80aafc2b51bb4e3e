package kinds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/store"
)

// Decode turns a stored document into the object served at k's version.
func (k *Kind) Decode(kv *store.KeyValue) (*unstructured.Unstructured, error) {
	return k.decodeWritten(kv, kv.ModRevision)
}

// decodeWritten is Decode for a document written at revision written, which
// differs from kv.ModRevision in a delete event (the revision of the delete
// on the document as it was).
func (k *Kind) decodeWritten(kv *store.KeyValue, written int64) (*unstructured.Unstructured, error) {
	m, err := DecodeMap(kv.Value)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode %s: %w", kv.Key, err))
	}
	if k.read.Stale(written) {
		k.read.apply(k, m)
	}
	if k.view != nil {
		if m, err = k.view.fromStored(m); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("decode %s: %w", kv.Key, err))
		}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(k.GVR.GroupVersion().String())
	u.SetKind(k.Kind)
	u.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
	return u, nil
}

// ApplyReadSchema prunes and defaults m, a stored document of k's kind
// decoded as is, as Decode reads a document stored before a schema change;
// a document written since reads the same. It does nothing for kinds
// without read schemas.
func (k *Kind) ApplyReadSchema(m map[string]any) {
	if k.read != nil {
		k.read.apply(k, m)
	}
}

// Encode returns the stored form of obj, an object of k's kind: JSON
// without resourceVersion (and without selfLink, which it drops from obj),
// at the kind's storage version. Versions of a CRD convert with strategy
// None, so converting is setting the apiVersion; like Kubernetes, the store
// then holds every object at a version the CRD's status.storedVersions lists.
// A view of another kind's objects (events.k8s.io/v1 Events) stores obj
// converted to that kind, as Decode converts it back.
func (k *Kind) Encode(obj *unstructured.Unstructured) ([]byte, error) {
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	obj.SetSelfLink("")
	if k.view != nil {
		m, err := k.view.toStored(obj.Object)
		obj.SetResourceVersion(rv)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
		}
		b, ok := appendObject(nil, m)
		if !ok {
			b, err = (&unstructured.Unstructured{Object: m}).MarshalJSON()
		}
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
		}
		return b, nil
	}
	av := obj.GetAPIVersion()
	if k.storage != "" && av != k.storage {
		// Converting to the storage version prunes with its schema, as
		// Kubernetes' storage converter does, and reading defaults with it:
		// the object is stored as it will read.
		k.read.applyVersion(k.storage, obj.Object)
		obj.SetAPIVersion(k.storage)
	}
	b, ok := appendObject(k.encodeBuffer(), obj.Object)
	var err error
	if ok {
		k.noteEncoded(len(b))
	} else {
		b, err = obj.MarshalJSON()
	}
	obj.SetAPIVersion(av)
	obj.SetResourceVersion(rv)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode: %w", err))
	}
	return b, nil
}

// DecodeMap decodes a stored document into its map, as the API decodes
// bodies: the reflection-free decoder, utiljson for what it leaves.
func DecodeMap(b []byte) (map[string]any, error) {
	if m, ok := objjson.Decode(b); ok {
		return m, nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("kinds: stored document is not an object")
	}
	return m, nil
}

// storedPrefix is how a document stored by Encode at k's version begins:
// Encode writes compact JSON with sorted keys, so apiVersion, kind and
// metadata come first.
func storedPrefix(k *Kind) []byte {
	gv, _ := json.Marshal(k.GVR.GroupVersion().String())
	kind, _ := json.Marshal(k.Kind)
	p := append([]byte(`{"apiVersion":`), gv...)
	p = append(p, `,"kind":`...)
	p = append(p, kind...)
	return append(p, `,"metadata":{`...)
}

// storedPrefix returns k.prefix, computing it when k was built without.
func (k *Kind) storedPrefix() []byte {
	if k.prefix != nil {
		return k.prefix
	}
	return storedPrefix(k)
}

var resourceVersionField = []byte(`"resourceVersion"`)

// ItemJSON returns kv as served at k's version with its resourceVersion.
// When the document starts with the stored prefix, is valid JSON, has no
// resourceVersion of its own and reads as stored (ReadSchemas), it splices
// the resourceVersion in; otherwise it decodes and re-encodes.
func (k *Kind) ItemJSON(kv *store.KeyValue) ([]byte, error) {
	prefix := k.storedPrefix()
	v := bytes.TrimRight(kv.Value, " \t\r\n")
	if !k.read.Stale(kv.ModRevision) && len(v) > len(prefix) && bytes.HasPrefix(v, prefix) &&
		!bytes.Contains(v, resourceVersionField) && json.Valid(v) {
		return spliceResourceVersion(prefix, v, kv.ModRevision), nil
	}
	u, err := k.Decode(kv)
	if err != nil {
		return nil, err
	}
	b, err := MarshalJSON(u)
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(b, "\n"), nil
}

// ServedJSON returns a document stored by Encode for k, at revision rev, as
// the API serves it: with "resourceVersion" inserted first in metadata. It
// returns nil when the document does not begin as Encode writes one at k's
// version (the caller then encodes the object itself). Encode drops the
// resourceVersion, so the document has none of its own.
func (k *Kind) ServedJSON(stored []byte, rev int64) []byte {
	prefix := k.storedPrefix()
	v := bytes.TrimRight(stored, " \t\r\n")
	if !bytes.HasPrefix(v, prefix) || len(v) == len(prefix) {
		return nil
	}
	return spliceResourceVersion(prefix, v, rev)
}

// spliceResourceVersion is the one place stored JSON is edited as bytes. It
// inserts "resourceVersion":"rev" first in the metadata of v, a document
// that begins with prefix (storedPrefix: everything up to and including the
// brace that opens metadata) and has at least one byte after it. The
// invariant that makes this safe: v is compact JSON as Encode writes it, so
// the byte after prefix is either the '}' that closes an empty metadata or
// the first key of a metadata that has no resourceVersion of its own
// (Encode drops it); the result is then v as served.
func spliceResourceVersion(prefix, v []byte, rev int64) []byte {
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
