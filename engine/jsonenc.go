package engine

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// marshalObject returns what Unstructured.MarshalJSON gives for obj (compact
// JSON, keys sorted, HTML-escaped strings as encoding/json writes them, and
// a newline), without reflection for the types JSON decoding produces:
// map[string]any, []any, string, int64, float64, bool and nil. It reports
// false for anything else; the caller then uses MarshalJSON.
func marshalObject(obj map[string]any) ([]byte, bool) {
	b, ok := appendJSON(make([]byte, 0, 1024), obj)
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

func appendJSON(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSON(b, x[k]); !ok {
				return nil, false
			}
		}
		return append(b, '}'), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSON(b, e); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	case string:
		return appendJSONString(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case bool:
		return strconv.AppendBool(b, x), true
	case nil:
		return append(b, "null"...), true
	case float64:
		f, err := json.Marshal(x)
		if err != nil {
			return nil, false
		}
		return append(b, f...), true
	}
	return nil, false
}

// appendJSONString appends s quoted as encoding/json quotes it (escaping
// HTML): directly when every byte is printable ASCII other than the quote,
// the backslash, '<', '>' and '&', through encoding/json otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
