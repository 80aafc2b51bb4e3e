package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// YAML renders v, a tree of maps with string keys, slices and JSON
// scalars (what CRD and For return), as block YAML with sorted keys. It
// writes only what YAML 1.2 and 1.1 parsers read alike: a string that could
// read as anything else is double-quoted.
func YAML(v any) []byte {
	var b strings.Builder
	writeValue(&b, reflect.ValueOf(v), 0, true)
	return []byte(b.String())
}

var plainString = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$`)

func scalarText(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		switch strings.ToLower(s) {
		case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
			return strconv.Quote(s)
		}
		if plainString.MatchString(s) {
			return s
		}
		q, _ := json.Marshal(s)
		return string(q)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Invalid:
		return "null"
	}
	panic(fmt.Sprintf("schema: YAML of %s", v.Type()))
}

// writeValue writes v after a key (or a list dash) at indent: a scalar or
// an empty container on the same line, else a block on the next lines.
func writeValue(b *strings.Builder, v reflect.Value, indent int, inline bool) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			b.WriteString(" null\n")
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Map:
		if v.Len() == 0 {
			b.WriteString(" {}\n")
			return
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		if !inline {
			b.WriteString("\n")
		}
		for i, k := range keys {
			if i > 0 || !inline {
				b.WriteString(strings.Repeat("  ", indent))
			}
			b.WriteString(scalarText(reflect.ValueOf(k)))
			b.WriteString(":")
			writeValue(b, v.MapIndex(reflect.ValueOf(k)), indent+1, false)
		}
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			b.WriteString(" []\n")
			return
		}
		if !inline {
			b.WriteString("\n")
		}
		for i := range v.Len() {
			if i > 0 || !inline {
				b.WriteString(strings.Repeat("  ", indent))
			}
			b.WriteString("-")
			e := v.Index(i)
			for e.Kind() == reflect.Interface && !e.IsNil() {
				e = e.Elem()
			}
			if e.Kind() == reflect.Map && e.Len() > 0 {
				b.WriteString(" ")
				writeValue(b, e, indent+1, true)
				continue
			}
			writeValue(b, e, indent+1, false)
		}
	default:
		b.WriteString(" ")
		b.WriteString(scalarText(v))
		b.WriteString("\n")
	}
}
