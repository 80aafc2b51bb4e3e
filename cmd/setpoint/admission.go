package main

import (
	"context"

	"github.com/setpoint-dev/setpoint/engine"
)

// admissionChain is the engine's admission: each admitter in turn, the
// first error denying the write.
type admissionChain []engine.Admitter

var _ engine.Admitter = admissionChain{}

// Mutate implements engine.Admitter: each admitter calls changing before a
// change it may make to req.Object.
func (c admissionChain) Mutate(ctx context.Context, req *engine.AdmissionRequest, changing func()) error {
	for _, a := range c {
		if err := a.Mutate(ctx, req, changing); err != nil {
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
