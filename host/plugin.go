package host

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Plugin is one loaded version of a plugin module, with its instance pool.
// Its methods are safe for concurrent use.
type Plugin struct {
	name     string
	digest   string
	abi      ABI
	handlers int32
	host     *Host
	cfg      Config
	log      *slog.Logger
	pool     *pool
	// ownPreemption: the module carries the host's loop-head checks and
	// runs without wazero's close-on-context-done.
	ownPreemption bool
	// preemptReason says why a native-ABI module runs on wazero's slower
	// close-on-context-done instead; empty otherwise.
	preemptReason string
	// tier is the background compile of a version loaded on the
	// interpreter (tier.go).
	tier tierState

	calls, failures atomic.Int64

	// egress sends the version's HTTP calls under cfg.Egress.
	egress lazyEgress

	mu       sync.Mutex // guards inflight, retired, closed
	inflight int
	retired  bool // no new calls; closes when inflight reaches 0
	closed   bool
	done     chan struct{} // closed once the version is closed
	doneOnce sync.Once
}

// errRetired is returned to a caller that reached a version after it was
// retired; a Handle then retries on the current version.
var errRetired = errors.New("host: plugin version retired")

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.name }

// Adopt gives a version that was loaded to check a module, and has served
// no call since, the plugin name and the permissions of cfg, so that it can
// be installed without loading the module again. It reports false, changing
// nothing, when cfg asks for other limits or preemption than the version was
// loaded with: those shape its runtime and its instances. The caller must
// hold the only reference to p; installing it (Registry.Swap) publishes the
// change to callers.
func (p *Plugin) Adopt(name string, cfg Config) bool {
	cfg.Limits = p.host.limits(cfg.Limits)
	if cfg.Limits != p.cfg.Limits || cfg.DisablePreemption != p.cfg.DisablePreemption {
		return false
	}
	// Only what calls read changes; the pool's idle timer reads Limits.
	p.tier.mu.Lock()
	defer p.tier.mu.Unlock()
	p.name = name
	p.log = p.host.opts.Logger.With("plugin", name)
	p.cfg.Permissions = cfg.Permissions
	p.cfg.Egress = cfg.Egress
	return true
}

// Digest is the module's content address ("sha256:...").
func (p *Plugin) Digest() string { return p.digest }

// ABI is the guest ABI of the module.
func (p *Plugin) ABI() ABI { return p.abi }

// HasReconcile, HasAdmit and HasFinalize report the handlers it provides.
func (p *Plugin) HasReconcile() bool { return p.handlers&abi.HasReconcile != 0 }

// HasAdmit reports whether the plugin provides an admission handler.
func (p *Plugin) HasAdmit() bool { return p.handlers&abi.HasAdmit != 0 }

// HasFinalize reports whether the plugin provides a finalize handler.
func (p *Plugin) HasFinalize() bool { return p.handlers&abi.HasFinalize != 0 }

// Preemption says how calls are stopped at their deadline: "loop-checks"
// (the host's own instrumentation, see preempt.go), "wazero"
// (close-on-context-done) or "off".
func (p *Plugin) Preemption() string {
	switch {
	case p.cfg.DisablePreemption:
		return "off"
	case p.ownPreemption:
		return "loop-checks"
	}
	return "wazero"
}

// PreemptionReason says why a module runs on wazero's close-on-context-done,
// the slower path (about 6 to 10 times the cost of a call), rather than the
// host's loop checks: most often a native-ABI module that does not import
// wasi_snapshot_preview1.sched_yield. It is empty for the loop checks, for
// Extism-ABI modules (which always run on wazero's) and when preemption is
// off.
func (p *Plugin) PreemptionReason() string { return p.preemptReason }

// Stats are counters of one plugin version.
type Stats struct {
	Calls, Failures int64
	IdleInstances   int
	// IdleMemoryBytes is the linear memory of the idle instances.
	IdleMemoryBytes uint64
	// InstancesStarted counts the instances ever started; it grows past the
	// pool size when instances are discarded or trimmed.
	InstancesStarted int64
}

// Stats reports the version's counters.
func (p *Plugin) Stats() Stats {
	mem, n := p.pool.memory()
	return Stats{Calls: p.calls.Load(), Failures: p.failures.Load(), IdleInstances: n, IdleMemoryBytes: mem,
		InstancesStarted: p.pool.started.Load()}
}

// Prewarm starts instances until n are idle, at most the pool size, so
// that the first calls after a load or swap do not pay for instantiation.
func (p *Plugin) Prewarm(ctx context.Context, n int) error {
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	if err := p.pool.prewarm(ctx, n); err != nil {
		return p.fail("prewarm", err)
	}
	return nil
}

// Reconcile calls the reconcile export.
func (p *Plugin) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	resp := new(abi.ReconcileResponse)
	// The output aliases guest memory until the next call: copy it once and
	// let the response's members alias the copy.
	decode := func(out []byte) error { return resp.DecodeOwned(bytes.Clone(out)) }
	err := p.invoke(ctx, abi.ExportReconcile, abi.HasReconcile, req.Config, req.AppendJSON, func() abi.ObjectRef { return abi.RefOf(req.Object) }, decode)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Admit calls the admit export.
func (p *Plugin) Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	resp := new(abi.AdmissionResponse)
	ref := func() abi.ObjectRef {
		return abi.ObjectRef{APIVersion: apiVersion(req.Kind), Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	}
	if err := p.invoke(ctx, abi.ExportAdmit, abi.HasAdmit, req.Config, req.AppendJSON, ref, resp.UnmarshalJSON); err != nil {
		return nil, err
	}
	return resp, nil
}

// Finalize calls the finalize export.
func (p *Plugin) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	resp := new(abi.FinalizeResponse)
	err := p.invoke(ctx, abi.ExportFinalize, abi.HasFinalize, req.Config, req.AppendJSON, func() abi.ObjectRef { return abi.RefOf(req.Object) }, resp.UnmarshalJSON)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func apiVersion(gvk abi.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version
	}
	return gvk.Group + "/" + gvk.Version
}

// invoke runs one call: it takes an instance, encodes the request into it,
// runs the export under the call deadline and decodes the response.
func (p *Plugin) invoke(ctx context.Context, export string, bit int32, config map[string]string, encode func([]byte) []byte,
	ref func() abi.ObjectRef, decode func([]byte) error) error {
	if p.handlers&bit == 0 {
		return &CallError{Plugin: p.name, Export: export, Err: ErrNoHandler}
	}
	if !p.acquire() {
		return errRetired
	}
	defer p.release()
	p.calls.Add(1)
	p.tier.calling()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Limits.CallTimeout)
	defer cancel()
	in, err := p.pool.getForCall(ctx)
	if err != nil {
		return p.fail(export, err)
	}
	scope := &callScope{p: p, export: export, ref: ref, config: config}
	ctx = context.WithValue(ctx, scopeKey{}, scope)
	buf := in.encodeBuffer()
	*buf = encode((*buf)[:0])
	out, err := in.call(ctx, export, *buf)
	if err == nil && ctx.Err() != nil {
		// The call returned past its deadline (the instance's own guard,
		// if any, had not fired yet) or after its caller gave up: the
		// caller has stopped waiting, so the answer is a timeout whatever
		// the guest returned, on either ABI. The guest finished its call,
		// so the instance serves again.
		f := ended(ctx, nil, p.cfg.Limits)
		f.keep = true
		err = f
	}
	if err != nil {
		var f *failure
		p.pool.put(in, !(errors.As(err, &f) && f.keep))
		return p.fail(export, err)
	}
	err = decode(out)
	p.pool.put(in, err != nil)
	if err != nil {
		return p.fail(export, &failure{err: ErrBadOutput, detail: "the response is not a valid " + export + " document: " + err.Error()})
	}
	return nil
}

func (p *Plugin) fail(export string, err error) error {
	p.failures.Add(1)
	ce := &CallError{Plugin: p.name, Export: export, Err: err}
	var f *failure
	if errors.As(err, &f) {
		ce.Err, ce.Detail = f.err, f.detail
	}
	return ce
}

func (p *Plugin) acquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		return false
	}
	p.inflight++
	return true
}

func (p *Plugin) release() {
	p.mu.Lock()
	p.inflight--
	last := p.retired && p.inflight == 0 && !p.closed
	if last {
		p.closed = true
	}
	p.mu.Unlock()
	if last {
		p.shutdown()
	}
}

// retire stops new calls; the version closes once its calls are over.
func (p *Plugin) retire() {
	p.mu.Lock()
	if p.retired {
		p.mu.Unlock()
		return
	}
	p.retired = true
	last := p.inflight == 0 && !p.closed
	if last {
		p.closed = true
	}
	p.mu.Unlock()
	if last {
		p.shutdown()
	}
}

func (p *Plugin) shutdown() {
	p.tier.stop()
	p.pool.close()
	p.host.untrack(p)
	p.doneOnce.Do(func() { close(p.done) })
}

// Close stops new calls, waits for the calls in flight (each bounded by its
// deadline) and releases the version's instances and runtime. It is
// idempotent.
func (p *Plugin) Close() error {
	p.retire()
	<-p.done
	return nil
}
