// Command childmaker is a guest whose reconcile desires the children its
// config "children" lists (a JSON array of objects), whatever their kind:
// for the tests of which children the server lets a plugin write.
package main

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() { guest.Register(plugin.Handlers{Reconcile: reconcile}) }

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	var docs []json.RawMessage
	if err := json.Unmarshal([]byte(req.Config["children"]), &docs); err != nil {
		return nil, plugin.Terminal(err)
	}
	resp := &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "made").Bytes()}
	for _, d := range docs {
		resp.Children = append(resp.Children, abi.RawJSON(d))
	}
	return resp, nil
}

func main() {}
