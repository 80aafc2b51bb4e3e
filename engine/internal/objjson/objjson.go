// Package objjson reads and writes the content of unstructured objects (the
// map[string]any trees JSON decoding gives) without reflection. Append
// writes them byte for byte as encoding/json does: keys sorted, strings
// escaped as it escapes them (HTML included), numbers as it writes them.
// Decode reads a JSON object as utiljson.Unmarshal does. The engine encodes
// and decodes stored documents and API bodies with them, the controller the
// objects of its reconcile requests and the plugins' answers.
//
// It also compares such trees, by three rules for three questions
// (DeepEqual, SemanticEqual, ValueEqual; equal.go sets them side by side),
// and normalises their numbers to the types the API's decoder gives
// (NormalizeNumbers).
package objjson

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Append appends the JSON of v to b. It reports false, for the caller to
// use encoding/json instead, when v holds anything but map[string]any,
// []any, string, int64, float64, bool and nil, or a float encoding/json
// refuses (NaN, infinities).
func Append(b []byte, v any) ([]byte, bool) {
	return appendValue(b, v, false)
}

// AppendMarkingFloats is Append, except that a float64 is written with a
// fraction or an exponent even when integral (1.0, not 1). A request
// body's number written so (1.0, 1e0) decodes into a float64 (Decode), and
// a decoder into a Go integer refuses it, as kube-apiserver's decoder
// refuses the request's own bytes; Append would write it as an integer
// the decoder accepts.
func AppendMarkingFloats(b []byte, v any) ([]byte, bool) {
	return appendValue(b, v, true)
}

func appendValue(b []byte, v any, markFloats bool) ([]byte, bool) {
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
			b = AppendString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendValue(b, x[k], markFloats); !ok {
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
			if b, ok = appendValue(b, e, markFloats); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	case string:
		return AppendString(b, x), true
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
		b = append(b, f...)
		if markFloats && !strings.ContainsAny(string(f), ".eE") {
			b = append(b, ".0"...)
		}
		return b, true
	}
	return nil, false
}

// AppendString appends s quoted as encoding/json quotes it (escaping
// HTML): directly when every byte is printable ASCII other than the quote,
// the backslash, '<', '>' and '&', through encoding/json otherwise.
func AppendString(b []byte, s string) []byte {
	if plainHTML(s) < len(s) {
		q, _ := json.Marshal(s) // a string always encodes
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
