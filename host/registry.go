package host

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Registry maps plugin names to their current version and swaps versions
// atomically: a call in flight finishes on the version it started on, a new
// call uses the new version, and a replaced version closes once its calls
// are over. Its methods are safe for concurrent use.
type Registry struct {
	host *Host

	mu      sync.Mutex // guards entries and closed
	entries map[string]*entry
	closed  bool
}

type entry struct {
	name string
	cur  atomic.Pointer[Plugin]
}

// NewRegistry returns an empty registry loading modules with h.
func NewRegistry(h *Host) *Registry {
	return &Registry{host: h, entries: make(map[string]*entry)}
}

func (r *Registry) entry(name string, create bool) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[name]
	if e == nil && create && !r.closed {
		e = &entry{name: name}
		r.entries[name] = e
	}
	return e
}

// Install loads wasm as the next version of the plugin name and swaps it
// in. When the module is refused, nothing running is replaced.
func (r *Registry) Install(ctx context.Context, name string, wasm []byte, cfg Config) (*Plugin, error) {
	p, err := r.host.Load(ctx, name, wasm, cfg)
	if err != nil {
		return nil, err
	}
	if err := r.Swap(name, p); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Swap makes p the current version of name and retires the previous one,
// which closes after its calls in flight.
func (r *Registry) Swap(name string, p *Plugin) error {
	e := r.entry(name, true)
	if e == nil {
		return ErrClosed
	}
	if old := e.cur.Swap(p); old != nil && old != p {
		old.retire()
	}
	return nil
}

// Get returns the current version of name, or nil.
func (r *Registry) Get(name string) *Plugin {
	if e := r.entry(name, false); e != nil {
		return e.cur.Load()
	}
	return nil
}

// Remove retires the current version of name.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	e := r.entries[name]
	delete(r.entries, name)
	r.mu.Unlock()
	if e != nil {
		if old := e.cur.Swap(nil); old != nil {
			old.retire()
		}
	}
}

// Close closes every version and waits for their calls. It is idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	entries := r.entries
	r.entries = map[string]*entry{}
	r.mu.Unlock()
	for _, e := range entries {
		if p := e.cur.Swap(nil); p != nil {
			p.Close()
		}
	}
	return nil
}

// Handle is a stable reference to a plugin by name that always calls its
// current version; it is what the engine holds.
type Handle struct {
	r    *Registry
	name string
}

// Handle returns a Handle for name; the plugin need not be installed yet.
func (r *Registry) Handle(name string) *Handle { return &Handle{r: r, name: name} }

// current returns the plugin to call, or a CallError when there is none.
func (h *Handle) current(export string) (*Plugin, error) {
	if p := h.r.Get(h.name); p != nil {
		return p, nil
	}
	return nil, &CallError{Plugin: h.name, Export: export, Err: ErrNotFound}
}

// call retries on the new version when a swap retired the one it reached.
func call[Resp any](h *Handle, export string, fn func(p *Plugin) (*Resp, error)) (*Resp, error) {
	for {
		p, err := h.current(export)
		if err != nil {
			return nil, err
		}
		resp, err := fn(p)
		if !errors.Is(err, errRetired) {
			return resp, err
		}
		if h.r.Get(h.name) == p {
			return nil, &CallError{Plugin: h.name, Export: export, Err: ErrClosed}
		}
	}
}

// Reconcile calls the current version's reconcile export.
func (h *Handle) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return call(h, abi.ExportReconcile, func(p *Plugin) (*abi.ReconcileResponse, error) { return p.Reconcile(ctx, req) })
}

// Admit calls the current version's admit export.
func (h *Handle) Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return call(h, abi.ExportAdmit, func(p *Plugin) (*abi.AdmissionResponse, error) { return p.Admit(ctx, req) })
}

// Finalize calls the current version's finalize export.
func (h *Handle) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return call(h, abi.ExportFinalize, func(p *Plugin) (*abi.FinalizeResponse, error) { return p.Finalize(ctx, req) })
}
