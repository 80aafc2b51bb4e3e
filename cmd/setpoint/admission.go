package main

import (
	"context"

	"github.com/setpoint-dev/setpoint/engine"
)

// admissionChain is the engine's admission: each admitter in turn, the
// first error denying the write.
type admissionChain []engine.Admitter

var _ engine.NotifyingAdmitter = admissionChain{}

// Mutate implements engine.Admitter.
func (c admissionChain) Mutate(ctx context.Context, req *engine.AdmissionRequest) error {
	for _, a := range c {
		if err := a.Mutate(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

// MutateNotify implements engine.NotifyingAdmitter: changing is called
// before any admitter that may change req.Object, at once before one that
// cannot say (not an engine.NotifyingAdmitter).
func (c admissionChain) MutateNotify(ctx context.Context, req *engine.AdmissionRequest, changing func()) error {
	for _, a := range c {
		if err := engine.MutateNotify(ctx, a, req, changing); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements engine.Admitter.
func (c admissionChain) Validate(ctx context.Context, req *engine.AdmissionRequest) error {
	for _, a := range c {
		if err := a.Validate(ctx, req); err != nil {
			return err
		}
	}
	return nil
}
