package main

import (
	"context"
	"sync"

	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
)

// Stage loads wasm as a candidate version of the plugin name that serves
// nothing until it is committed: the version the upload's check loaded when
// it is of this module and was loaded with the limits cfg asks for, else a
// new load (from the on-disk cache after a check). host.Load has compiled
// the module, read its ABI version and handlers and initialized its first
// instance within cfg's memory cap and call deadline, so a module that traps
// in init, speaks another ABI version or needs more memory than the cap is
// refused here, and the version serving now is untouched.
func (a hostAdapter) Stage(ctx context.Context, name string, wasm []byte, digest string, cfg plugins.Config) (plugins.Candidate, error) {
	hcfg := hostConfig(cfg)
	if a.checked != nil {
		if p := a.checked.take(digest); p != nil {
			if p.Adopt(name, hcfg) {
				return &candidate{reg: a.reg, name: name, p: p}, nil
			}
			_ = p.Close()
		}
	}
	p, err := a.h.LoadDigest(ctx, name, wasm, digest, hcfg)
	if err != nil {
		return nil, err
	}
	return &candidate{reg: a.reg, name: name, p: p}, nil
}

// candidate is a loaded host version that is not in the registry yet.
type candidate struct {
	reg  *host.Registry
	name string

	mu sync.Mutex
	p  *host.Plugin // nil once committed or discarded
}

var _ plugins.Candidate = (*candidate)(nil)

func (c *candidate) Exports() plugins.Exports {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil {
		return plugins.Exports{}
	}
	return exportsOf(c.p)
}

func (c *candidate) Commit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == nil {
		return host.ErrClosed
	}
	p := c.p
	c.p = nil
	if err := c.reg.Swap(c.name, p); err != nil {
		_ = p.Close()
		return err
	}
	return nil
}

func (c *candidate) Discard() {
	c.mu.Lock()
	p := c.p
	c.p = nil
	c.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}
