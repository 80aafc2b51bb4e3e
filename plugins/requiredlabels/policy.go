package main

import (
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Admit denies a CREATE or UPDATE whose object lacks a required label.
func Admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Operation == abi.Delete {
		return &abi.AdmissionResponse{Allowed: true}, nil
	}
	var missing []string
	for _, l := range strings.Split(req.Config["labels"], ",") {
		l = strings.TrimSpace(l)
		if l != "" && !req.Object.Has("metadata", "labels", l) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return &abi.AdmissionResponse{Allowed: true}, nil
	}
	return &abi.AdmissionResponse{
		Code:    422,
		Message: req.Kind.Kind + " " + req.Name + " is missing required labels: " + strings.Join(missing, ", "),
	}, nil
}
