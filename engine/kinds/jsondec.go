package kinds

import "github.com/setpoint-dev/setpoint/engine/internal/objjson"

// DecodeJSONObject decodes a JSON object as utiljson.Unmarshal does into a
// map[string]any (integers that fit in int64 as int64, other numbers as
// float64, the last of duplicate keys kept), without reflection. Strings
// with escapes or non-ASCII bytes are decoded by utiljson itself. It
// reports false for anything that is not a valid JSON object or that it
// does not handle (a number out of range); the caller then decodes with
// utiljson, which gives the error. The engine decodes stored documents
// with it, and the API request bodies; the controller, plugins' output
// (objjson.Decode, the same decoder).
func DecodeJSONObject(b []byte) (map[string]any, bool) { return objjson.Decode(b) }
