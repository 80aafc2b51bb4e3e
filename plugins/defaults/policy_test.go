package main

import (
	"context"
	"testing"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

var config = map[string]string{"labels.team": "platform", "labels.app.kubernetes.io/managed-by": "setpoint", "annotations.owner": "ops"}

var tests = []struct {
	name   string
	op     abi.Operation
	object string
	patch  string
}{
	{"no metadata maps", abi.Create, `{"metadata":{"name":"w"}}`,
		`[{"op":"add","path":"/metadata/labels","value":{"app.kubernetes.io/managed-by":"setpoint","team":"platform"}},{"op":"add","path":"/metadata/annotations","value":{"owner":"ops"}}]`},
	{"some labels present", abi.Update, `{"metadata":{"name":"w","labels":{"team":"web"},"annotations":{}}}`,
		`[{"op":"add","path":"/metadata/labels/app.kubernetes.io~1managed-by","value":"setpoint"},{"op":"add","path":"/metadata/annotations/owner","value":"ops"}]`},
	{"everything present", abi.Create, `{"metadata":{"labels":{"team":"a","app.kubernetes.io/managed-by":"x"},"annotations":{"owner":"me"}}}`, ``},
	{"delete", abi.Delete, ``, ``},
}

func request(op abi.Operation, object string) *abi.AdmissionRequest {
	return &abi.AdmissionRequest{Operation: op, Object: abi.RawJSON(object), Config: config}
}

func TestAdmitNative(t *testing.T) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Admit(&plugintest.Host{}, request(tt.op, tt.object))
			if err != nil || !resp.Allowed || string(resp.Patch) != tt.patch {
				t.Fatalf("Admit = %+v (patch %s), %v; want patch %s", resp, resp.Patch, err, tt.patch)
			}
		})
	}
}

func TestAdmitUnderHost(t *testing.T) {
	p := hosttest.LoadUnhurried(t, "defaults", host.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Admit(context.Background(), request(tt.op, tt.object))
			if err != nil || !resp.Allowed || string(resp.Patch) != tt.patch {
				t.Fatalf("Admit = %+v (patch %s), %v", resp, resp.Patch, err)
			}
			if tt.patch == "" {
				return
			}
			// The patch applies, and afterwards every default is set.
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			out, err := patch.Apply([]byte(tt.object))
			if err != nil {
				t.Fatal(err)
			}
			obj := abi.RawJSON(out)
			if obj.String("metadata", "labels", "app.kubernetes.io/managed-by") == "" || obj.String("metadata", "annotations", "owner") != "ops" || obj.String("metadata", "labels", "team") == "" {
				t.Fatalf("patched object %s lacks defaults", out)
			}
		})
	}
}
