package controller

import (
	"encoding/json"
	"slices"
	"strconv"
)

// encodeObject returns the JSON of an unstructured object's content as
// encoding/json writes it (what Unstructured.MarshalJSON gives, without its
// trailing newline): keys sorted, the same escapes, the same numbers. It
// walks the map[string]any tree itself and leaves only what is unusual in
// an object (floats, strings that need escapes, other types) to
// encoding/json: the controller encodes the object and each observed child
// for every reconcile call, and through reflection that cost more CPU than
// the Wasm plugin's whole call.
func encodeObject(obj map[string]any) ([]byte, error) {
	return appendJSONValue(make([]byte, 0, 1024), obj)
}

func appendJSONValue(b []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v)
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, k); err != nil {
				return b, err
			}
			b = append(b, ':')
			if b, err = appendJSONValue(b, v[k]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	enc, err := json.Marshal(v)
	return append(b, enc...), err
}

// appendJSONString writes s directly when encoding/json would write it
// unchanged (printable ASCII other than the quote, the backslash and the
// HTML-sensitive <, > and &), and through encoding/json otherwise.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, err := json.Marshal(s)
			return append(b, enc...), err
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}
