package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// output is a parsed -o flag.
type output struct {
	format string // table, wide, yaml, json, name, jsonpath
	jp     *jsonpath.JSONPath
}

const outputHelp = "output format: table, wide, yaml, json, name or jsonpath=TEMPLATE"

func parseOutput(s string) (output, error) {
	switch s {
	case "", "table":
		return output{format: "table"}, nil
	case "wide", "yaml", "json", "name":
		return output{format: s}, nil
	}
	if tmpl, ok := strings.CutPrefix(s, "jsonpath="); ok {
		if tmpl == "" {
			return output{}, usageError("-o jsonpath= needs a template, such as jsonpath='{.spec.size}'")
		}
		if !strings.Contains(tmpl, "{") {
			tmpl = "{" + tmpl + "}"
		}
		jp := jsonpath.New("output").AllowMissingKeys(true)
		if err := jp.Parse(tmpl); err != nil {
			return output{}, usageError("-o jsonpath: %v", err)
		}
		return output{format: "jsonpath", jp: jp}, nil
	}
	want := strings.TrimPrefix(outputHelp, "output format: ")
	format, _, _ := strings.Cut(s, "=")
	switch format {
	case "custom-columns", "custom-columns-file", "go-template", "go-template-file", "template", "templatefile", "jsonpath-file", "jsonpath-as-json":
		return output{}, usageError("setpoint does not support -o %s (kubectl's -o %s works against the same server); want %s", format, format, want)
	}
	return output{}, usageError("unknown output format %q; want %s", s, want)
}

// cleanForOutput drops what people do not read: managed fields.
func cleanForOutput(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
}

// printObject prints one object (or a List object) as yaml, json or jsonpath.
func printObject(w io.Writer, o output, obj map[string]any) error {
	switch o.format {
	case "json":
		b, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "jsonpath":
		if err := o.jp.Execute(w, obj); err != nil {
			return exitError(exitUsage, fmt.Errorf("-o jsonpath: %w", err))
		}
		return nil
	}
	return fmt.Errorf("printObject: format %s", o.format)
}

// listObject wraps items in a v1 List, as kubectl prints several objects.
func listObject(items []unstructured.Unstructured) map[string]any {
	out := make([]any, 0, len(items))
	for i := range items {
		cleanForOutput(&items[i])
		out = append(out, items[i].Object)
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
		"items":      out,
	}
}
