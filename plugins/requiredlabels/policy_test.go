package main

import (
	"context"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

var tests = []struct {
	name    string
	op      abi.Operation
	object  string
	allowed bool
	message string
}{
	{"all labels", abi.Create, `{"metadata":{"name":"w","labels":{"team":"a","env":"prod"}}}`, true, ""},
	{"one missing", abi.Create, `{"metadata":{"name":"w","labels":{"team":"a"}}}`, false, "Widget w is missing required labels: env"},
	{"no labels", abi.Update, `{"metadata":{"name":"w"}}`, false, "Widget w is missing required labels: team, env"},
	{"delete is allowed", abi.Delete, ``, true, ""},
}

func request(op abi.Operation, object string) *abi.AdmissionRequest {
	return &abi.AdmissionRequest{Kind: abi.GroupVersionKind{Group: "example.setpoint.dev", Version: "v1", Kind: "Widget"},
		Name: "w", Namespace: "default", Operation: op, Object: abi.RawJSON(object), DryRun: true,
		Config: map[string]string{"labels": "team, env"}}
}

func TestAdmitNative(t *testing.T) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Admit(&plugintest.Host{}, request(tt.op, tt.object))
			if err != nil || resp.Allowed != tt.allowed || resp.Message != tt.message || (!tt.allowed && resp.Code != 422) {
				t.Fatalf("Admit = %+v, %v", resp, err)
			}
		})
	}
}

// TestAdmitUnderHost runs the built module under the real host.
func TestAdmitUnderHost(t *testing.T) {
	p := hosttest.LoadUnhurried(t, "requiredlabels", host.Config{})
	if !p.HasAdmit() || p.HasReconcile() {
		t.Fatal("requiredlabels registers admit only")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Admit(context.Background(), request(tt.op, tt.object))
			if err != nil || resp.Allowed != tt.allowed || resp.Message != tt.message {
				t.Fatalf("Admit = %+v, %v", resp, err)
			}
		})
	}
}
