package kinds

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// marshalObject returns what Unstructured.MarshalJSON gives for obj (compact
// JSON, keys sorted, HTML-escaped strings as encoding/json writes them, and
// a newline), without reflection for the types JSON decoding produces:
// map[string]any, []any, string, int64, float64, bool and nil. It reports
// false for anything else; the caller then uses MarshalJSON.
func marshalObject(obj map[string]any) ([]byte, bool) {
	b, ok := objjson.Append(make([]byte, 0, 1024), obj)
	if !ok {
		return nil, false
	}
	return append(b, '\n'), true
}

// MarshalJSON returns obj.MarshalJSON(): the same bytes, made without
// reflection when obj holds only the types JSON decoding produces.
func MarshalJSON(obj *unstructured.Unstructured) ([]byte, error) {
	if obj.Object != nil {
		if b, ok := marshalObject(obj.Object); ok {
			return b, nil
		}
	}
	return obj.MarshalJSON()
}
