package abi

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzStringMap: on any valid JSON object in valid UTF-8, StringMap agrees
// with encoding/json decoding into map[string]string (nil where
// encoding/json refuses), and it never panics on anything. Invalid UTF-8
// inside strings is kept as it is, where encoding/json substitutes U+FFFD
// (the host checks what guests return; testdata keeps such an input).
func FuzzStringMap(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"a":null}`, `{"a":1}`, `{"\u00e9":"\ud83d\ude00"}`, `{"a":"b","a":"c"}`, `[1]`, `{"a":`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := RawJSON(s).StringMap()
		if !json.Valid([]byte(s)) || !utf8.ValidString(s) || len(s) == 0 || s[0] != '{' {
			return
		}
		var want map[string]string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			if got != nil {
				t.Fatalf("StringMap(%s) = %v, encoding/json refuses it: %v", s, got, err)
			}
			return
		}
		if got == nil {
			got = map[string]string{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("StringMap(%s) = %v, encoding/json %v", s, got, want)
		}
	})
}
