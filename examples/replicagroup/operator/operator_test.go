package operator_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/examples/replicagroup/operator"
	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
	"github.com/setpoint-dev/setpoint/sdk/plugintest"
)

func group(replicas int, message string) abi.RawJSON {
	return abi.RawJSON(fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"ReplicaGroup",`+
		`"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":%d,"message":%q}}`, replicas, message))
}

func replicas(n int, message string) []abi.RawJSON {
	var out []abi.RawJSON
	for i := range n {
		out = append(out, abi.RawJSON(fmt.Sprintf(`{"apiVersion":"example.setpoint.dev/v1","kind":"Replica",`+
			`"metadata":{"name":"web-%d","namespace":"default"},"spec":{"group":"web","index":%d,"message":%q}}`, i, i, message)))
	}
	return out
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name         string
		obj          abi.RawJSON
		observed     []abi.RawJSON
		wantChildren []string
		wantStatus   string
	}{
		{"new group", group(3, "hi"), nil, []string{"web-0", "web-1", "web-2"}, `{"replicas":0,"state":"Scaling"}`},
		{"all observed", group(3, "hi"), replicas(3, "hi"), []string{"web-0", "web-1", "web-2"}, `{"replicas":3,"state":"Ready"}`},
		{"scale up", group(5, "hi"), replicas(3, "hi"), []string{"web-0", "web-1", "web-2", "web-3", "web-4"}, `{"replicas":3,"state":"Scaling"}`},
		{"scale down", group(2, "hi"), replicas(5, "hi"), []string{"web-0", "web-1"}, `{"replicas":2,"state":"Scaling"}`},
		{"scaled down", group(2, "hi"), replicas(2, "hi"), []string{"web-0", "web-1"}, `{"replicas":2,"state":"Ready"}`},
		{"message changed", group(2, "bye"), replicas(2, "hi"), []string{"web-0", "web-1"}, `{"replicas":0,"state":"Scaling"}`},
		{"scale to zero", group(0, "hi"), replicas(2, "hi"), nil, `{"replicas":0,"state":"Scaling"}`},
		{"zero", group(0, "hi"), nil, nil, `{"replicas":0,"state":"Ready"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := operator.Reconcile(&plugintest.Host{}, &abi.ReconcileRequest{
				Object: tt.obj, Children: map[string][]abi.RawJSON{operator.ChildKey: tt.observed},
			})
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Status) != tt.wantStatus {
				t.Errorf("status = %s, want %s", resp.Status, tt.wantStatus)
			}
			var names []string
			for i, c := range resp.Children {
				ref := abi.RefOf(c)
				if ref.Kind != operator.ChildKind || ref.APIVersion != operator.ChildAPIVersion || ref.Namespace != "default" {
					t.Errorf("child %d = %+v", i, ref)
				}
				if c.Int("spec", "index") != int64(i) || c.String("spec", "group") != "web" ||
					c.String("spec", "message") != tt.obj.String("spec", "message") ||
					c.String("metadata", "labels", "example.setpoint.dev/replicagroup") != "web" {
					t.Errorf("child %d = %s", i, c)
				}
				names = append(names, ref.Name)
			}
			if !slices.Equal(names, tt.wantChildren) {
				t.Errorf("children = %v, want %v", names, tt.wantChildren)
			}
		})
	}
}

func TestReconcileErrors(t *testing.T) {
	tests := []struct {
		name         string
		obj          abi.RawJSON
		config       map[string]string
		wantErr      error
		wantTerminal bool
	}{
		{"over the default limit", group(operator.DefaultMaxReplicas+1, ""), nil, operator.ErrTooManyReplicas, false},
		{"over the configured limit", group(4, ""), map[string]string{"maxReplicas": "3"}, operator.ErrTooManyReplicas, false},
		{"negative", group(-1, ""), nil, operator.ErrInvalidReplicas, true},
		{"missing", abi.RawJSON(`{"metadata":{"name":"web"},"spec":{}}`), nil, operator.ErrInvalidReplicas, true},
		{"bad config", group(1, ""), map[string]string{"maxReplicas": "many"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := operator.Reconcile(&plugintest.Host{}, &abi.ReconcileRequest{Object: tt.obj, Config: tt.config})
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if resp == nil || !strings.Contains(string(resp.Status), `"state":"Failed"`) {
				t.Errorf("status with the error: %v, want state Failed", resp)
			}
			if got := errors.Is(err, plugin.ErrTerminal); got != tt.wantTerminal {
				t.Fatalf("terminal = %v, want %v (%v)", got, tt.wantTerminal, err)
			}
		})
	}
	// Within a raised limit the same spec reconciles.
	if _, err := operator.Reconcile(&plugintest.Host{}, &abi.ReconcileRequest{
		Object: group(4, ""), Config: map[string]string{"maxReplicas": "4"},
	}); err != nil {
		t.Fatal(err)
	}
}
