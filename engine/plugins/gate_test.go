package plugins

import (
	"context"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

func TestStartupGate(t *testing.T) {
	crd := widgetRequest(engine.OpCreate)
	crd.Resource = kinds.CRDResource
	gadget := widgetRequest(engine.OpCreate)
	gadget.Resource.Resource = "gadgets"
	tests := []struct {
		name     string
		req      *engine.AdmissionRequest
		wantHeld bool
	}{
		{name: "a bound resource waits", req: widgetRequest(engine.OpCreate), wantHeld: true},
		{name: "a delete of a bound resource waits", req: widgetRequest(engine.OpDelete), wantHeld: true},
		{name: "another resource goes on", req: gadget},
		{name: "the server's own bookkeeping goes on", req: crd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAdmitter(quietLogger())
			g := &startupGate{done: make(chan struct{}), resources: []string{"widgets.example.setpoint.dev"}, wait: time.Minute}
			a.gate.Store(g)
			returned := make(chan error, 1)
			go func() { returned <- a.Validate(context.Background(), tt.req) }()
			if !tt.wantHeld {
				// Not held: it returns, however long a loaded machine
				// takes to run it.
				select {
				case <-returned:
				case <-time.After(10 * time.Second):
					t.Fatal("held by the gate")
				}
				return
			}
			select {
			case err := <-returned:
				t.Fatalf("returned before the gate opened: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			close(g.done)
			if err := <-returned; err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("the wait is bounded", func(t *testing.T) {
		a := NewAdmitter(quietLogger())
		a.gate.Store(&startupGate{done: make(chan struct{}), resources: []string{"*"}, wait: 50 * time.Millisecond})
		if err := a.Validate(context.Background(), widgetRequest(engine.OpCreate)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a replaced gate is checked again", func(t *testing.T) {
		a := NewAdmitter(quietLogger()) // the first gate holds everything
		first := a.gate.Load()
		returned := make(chan error, 1)
		go func() { returned <- a.Validate(context.Background(), widgetRequest(engine.OpCreate)) }()
		next := &startupGate{done: make(chan struct{}), resources: []string{"widgets.example.setpoint.dev"}, wait: time.Minute}
		a.gate.Store(next)
		close(first.done)
		select {
		case <-returned:
			t.Fatal("returned while the new gate holds the resource")
		case <-time.After(100 * time.Millisecond):
		}
		close(next.done)
		if err := <-returned; err != nil {
			t.Fatal(err)
		}
	})
}
