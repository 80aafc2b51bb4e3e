package plugins

import (
	"context"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
)

// TestLoadingGate: while a Plugin's first load on this replica runs, the
// writes its admission rules bind wait; others go on; closing the gate lets
// the held ones go on.
func TestLoadingGate(t *testing.T) {
	a := NewAdmitter(quietLogger())
	close(a.gate.Load().done) // past startup
	a.openLoading("policy", []string{"widgets.example.setpoint.dev"})

	gadget := widgetRequest(engine.OpCreate)
	gadget.Resource.Resource = "gadgets"
	if err := a.Validate(context.Background(), gadget); err != nil {
		t.Fatalf("a write the loading Plugin does not bind: %v", err)
	}
	returned := make(chan error, 1)
	go func() { returned <- a.Validate(context.Background(), widgetRequest(engine.OpCreate)) }()
	select {
	case err := <-returned:
		t.Fatalf("a bound write returned while the Plugin loads: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	a.closeLoading("policy")
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still held after the load ended")
	}
	a.closeLoading("policy") // idempotent

	ctx, cancel := context.WithCancel(context.Background())
	a.openLoading("policy", []string{"*"})
	cancel()
	if err := a.Validate(ctx, widgetRequest(engine.OpCreate)); err == nil {
		t.Fatal("a held write whose context ended went on")
	}
	a.closeLoading("policy")
}
