package controller_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// A status larger than the engine stores (1.5 MiB by default) is refused;
// the object's Ready condition says so, where the plugin's author looks,
// and the reconcile is not retried until the object changes.
func TestStatusTooLargeIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		big := abi.RawJSON(`{"state":"ok","blob":"` + strings.Repeat("x", 1600<<10) + `"}`)
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			return &abi.ReconcileResponse{Status: big}, nil
		})
		_, stop := runManager(t, newController(t, c, "bloated", r, nil))
		defer stop()
		create(t, c, widgets, newWidget("w", "small"))
		synctest.Wait()
		u := get(t, c, widgets, "w")
		s, reason, msg := ready(u)
		if s != "False" || reason != controller.ReasonTerminalError || !strings.Contains(msg, "request is too large") {
			t.Errorf("Ready = %s/%s %q, want False/TerminalError about the size", s, reason, msg)
		}
		if _, ok := u.Object["status"].(map[string]any)["blob"]; ok {
			t.Error("the oversized status was stored")
		}
	})
}
