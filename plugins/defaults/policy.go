package main

import (
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Admit allows every request and patches in the configured defaults.
func Admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Operation == abi.Delete {
		return &abi.AdmissionResponse{Allowed: true}, nil
	}
	keys := make([]string, 0, len(req.Config))
	for k := range req.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ops []abi.RawJSON
	for _, field := range []string{"labels", "annotations"} {
		defaults := map[string]string{}
		for _, k := range keys {
			if name, ok := strings.CutPrefix(k, field+"."); ok && name != "" && !req.Object.Has("metadata", field, name) {
				defaults[name] = req.Config[k]
			}
		}
		if len(defaults) == 0 {
			continue
		}
		if !req.Object.Has("metadata", field) {
			// One op creates the whole map.
			ops = append(ops, abi.NewObject(nil).Str("op", "add").Str("path", "/metadata/"+field).StrMap("value", defaults).Bytes())
			continue
		}
		for _, k := range keys {
			name, _ := strings.CutPrefix(k, field+".")
			if v, ok := defaults[name]; ok && strings.HasPrefix(k, field+".") {
				ops = append(ops, abi.NewObject(nil).Str("op", "add").Str("path", "/metadata/"+field+"/"+escape(name)).Str("value", v).Bytes())
			}
		}
	}
	resp := &abi.AdmissionResponse{Allowed: true}
	if len(ops) > 0 {
		patch := []byte{'['}
		for i, op := range ops {
			if i > 0 {
				patch = append(patch, ',')
			}
			patch = append(patch, op...)
		}
		resp.Patch = append(patch, ']')
	}
	return resp, nil
}

// escape encodes a JSON Pointer reference token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
