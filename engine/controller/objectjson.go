package controller

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// encodeObject returns the JSON of an unstructured object's content as
// encoding/json writes it (what Unstructured.MarshalJSON gives, without its
// trailing newline): keys sorted, the same escapes, the same numbers. It
// walks the map[string]any tree without reflection (engine/internal/objjson)
// and leaves an object with anything unusual in it to encoding/json: the
// controller encodes the object and each observed child for every
// reconcile call, and through reflection that cost more CPU than the Wasm
// plugin's whole call.
func encodeObject(obj map[string]any) ([]byte, error) {
	if b, ok := objjson.Append(make([]byte, 0, 1024), obj); ok {
		return b, nil
	}
	return json.Marshal(obj)
}
