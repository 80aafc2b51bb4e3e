package gc

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// decodeForGC decodes what the collector needs of a stored document
// (metadata, and the timestamps that age an Event) into an unstructured
// object that holds nothing else. It decodes as the engine does, keys
// matched exactly (see engine.DecodeStoredMeta).
func decodeForGC(kv *store.KeyValue) (*unstructured.Unstructured, error) {
	doc, err := gcDocOf(kv.Value)
	if err != nil {
		return nil, err
	}
	md, _ := doc["metadata"].(map[string]any)
	if md == nil {
		return nil, errors.New("gc: stored document has no metadata")
	}
	m := map[string]any{"metadata": md}
	for _, k := range []string{"lastTimestamp", "eventTime"} {
		if v, ok := doc[k]; ok && v != nil {
			m[k] = v
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// gcDocOf decodes the members of a stored document decodeForGC reads. The
// sweeps decode every stored object, so it walks the document and decodes
// only those (spec and status are stepped over, as engine.DecodeStoredMeta
// does); a
// document it cannot walk is decoded whole.
func gcDocOf(b []byte) (map[string]any, error) {
	raw := map[string][]byte{}
	d := objjson.NewScanner(b)
	walked := d.Object(func(k string) bool {
		switch k {
		case "metadata", "lastTimestamp", "eventTime":
			v, ok := d.Raw()
			raw[k] = v // the last of duplicate keys wins, as in decodeMap
			return ok
		}
		return d.Skip()
	}) && d.Done()
	if !walked {
		return kinds.DecodeMap(b)
	}
	doc := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if v[0] == '{' {
			m, err := kinds.DecodeMap(v)
			if err != nil {
				return nil, err
			}
			x = m
		} else if err := utiljson.Unmarshal(v, &x); err != nil {
			return nil, err
		}
		doc[k] = x
	}
	return doc, nil
}
