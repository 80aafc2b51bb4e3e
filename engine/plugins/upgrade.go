package plugins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// upgrade loads the spec's module as the plugin's next version and swaps it
// in only once it is verified: the host has compiled it, checked its ABI
// version and memory needs against the limits and run its init (Stage), and
// its exports cover every binding of the spec (verifyExports). Until then,
// and when any of that fails, the version serving now keeps serving with the
// bindings it has, and the returned failure says why. It returns an error
// only for what a retry may cure (the store, the request's context).
func (m *Manager) upgrade(ctx context.Context, name string, obj *unstructured.Unstructured, cur *loaded, sp Spec, cfg Config, hostKey string) (*failure, []abi.Event, error) {
	digest := sp.Module.Digest
	wasm, err := m.opts.Modules.Get(ctx, digest)
	if err != nil {
		if !errors.Is(err, ErrModuleNotFound) {
			return nil, nil, err
		}
		return &failure{reason: ReasonModuleNotFound, err: fmt.Errorf("module %s was not uploaded (POST it to %s)", digest, ModulesPath)}, nil, nil
	}
	cand, err := m.opts.Host.Stage(ctx, name, wasm, digest, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		m.log.Warn("plugin module refused; the running version, if any, keeps serving", "plugin", name, "digest", digest, "serving", cur.digest, "err", err)
		return refused(ReasonInvalidModule, fmt.Errorf("module %s refused: %w", digest, err)), nil, nil
	}
	exports := cand.Exports()
	lacking, err := m.verifyExports(ctx, name, obj, cur, sp, exports)
	if err != nil || lacking != nil {
		cand.Discard()
		if err != nil {
			return nil, nil, err
		}
		m.log.Warn("plugin module lacks an export its spec binds; the running version, if any, keeps serving", "plugin", name, "digest", digest, "serving", cur.digest, "err", lacking)
		return refused(ReasonMissingExport, lacking), nil, nil
	}
	if err := cand.Commit(); err != nil {
		return nil, nil, fmt.Errorf("plugins: swap in module %s: %w", digest, err)
	}
	m.log.Info("plugin loaded", "plugin", name, "digest", digest, "replaced", cur.digest)
	msg := "loaded module " + digest
	if cur.digest != "" && cur.digest != digest {
		msg = "swapped module " + cur.digest + " for " + digest
	}
	m.mu.Lock()
	cur.digest, cur.hostKey, cur.exports = digest, hostKey, exports
	m.plugins[name] = cur
	m.mu.Unlock()
	cur.breakers.reset() // a new module or host configuration starts afresh
	return nil, []abi.Event{{Type: "Normal", Reason: "ModuleLoaded", Message: msg}}, nil
}

// refused is the failure of a module that will not serve: terminal until
// the spec changes, with a Warning event.
func refused(reason string, err error) *failure {
	return &failure{reason: reason, err: err, terminal: true,
		events: []abi.Event{{Type: "Warning", Reason: "ModuleRefused", Message: err.Error()}}}
}

// verifyExports says what a candidate with exports lacks to serve the
// spec's bindings, or nil: admit when spec.admission binds it, reconcile
// when spec.reconcile does, and finalize when the version serving now (or,
// after a restart, the version that served before it) exports it and
// objects still carry its finalizer, whose deletion would otherwise wait
// for good.
func (m *Manager) verifyExports(ctx context.Context, name string, obj *unstructured.Unstructured, cur *loaded, sp Spec, exports Exports) (lacking, err error) {
	var missing []string
	if len(sp.Admission) > 0 && !exports.Admit {
		missing = append(missing, "admit, which spec.admission binds")
	}
	if sp.Reconcile != nil && !exports.Reconcile {
		missing = append(missing, "reconcile, which spec.reconcile binds")
	}
	if sp.Reconcile != nil && exports.Reconcile && !exports.Finalize && m.mayCarryFinalizer(obj, cur, sp) {
		n, res, err := m.carryingFinalizer(ctx, name, sp)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			missing = append(missing, fmt.Sprintf("finalize, and %s carrying its finalizer %s would never finish deleting", countObjects(n, res), finalizerOf(name)))
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	return fmt.Errorf("module %s does not export %s", sp.Module.Digest, strings.Join(missing, "; nor ")), nil
}

// mayCarryFinalizer reports whether objects may carry the plugin's
// finalizer: the version serving now exports finalize, or none serves yet
// and the status names another module that served before a restart.
func (m *Manager) mayCarryFinalizer(obj *unstructured.Unstructured, cur *loaded, sp Spec) bool {
	if cur.digest != "" {
		return cur.exports.Finalize
	}
	prev, _, _ := unstructured.NestedString(obj.Object, "status", "loadedDigest")
	return prev != "" && prev != sp.Module.Digest
}

// carryingFinalizer counts the objects of the reconciled resource that
// carry the plugin's finalizer, stopping at the first page that has any.
func (m *Manager) carryingFinalizer(ctx context.Context, name string, sp Spec) (int, string, error) {
	r, err := resolve(m.opts.Service, sp.Reconcile.For)
	if err != nil {
		return 0, "", nil // nothing served, nothing carries it
	}
	fin := finalizerOf(name)
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := m.opts.Service.List(ctx, r.GVR, "", opts)
		if err != nil {
			return 0, "", fmt.Errorf("plugins: list %s for finalizer %s: %w", r.GVR.GroupResource(), fin, err)
		}
		n := 0
		for i := range list.Items {
			if slices.Contains(list.Items[i].GetFinalizers(), fin) {
				n++
			}
		}
		if n > 0 || list.GetContinue() == "" {
			return n, r.GVR.GroupResource().String(), nil
		}
		opts.Continue = list.GetContinue()
	}
}

func countObjects(n int, res string) string {
	if n == 1 {
		return "1 object of " + res
	}
	return fmt.Sprintf("%d objects of %s", n, res)
}

// admissionBindings are the bindings of the spec's admission rules to
// caller. When unservable is set, each binding fails every call with it
// instead, so that a rule the plugin cannot serve is never silently
// unbound: failurePolicy Fail refuses the writes it covers, naming the
// plugin and why, and Ignore lets them through with a warning.
func admissionBindings(name string, caller Caller, sp Spec, unservable error) []*admissionBinding {
	if unservable != nil {
		caller = unservableCaller{err: unservable}
	}
	out := make([]*admissionBinding, 0, len(sp.Admission))
	for _, r := range sp.Admission {
		out = append(out, &admissionBinding{
			plugin: name, caller: caller, resources: r.Resources, ops: r.Operations,
			mutating: r.Type == Mutating, ignore: r.FailurePolicy == Ignore, config: sp.Config,
			privileged: sp.Privileged,
		})
	}
	return out
}

// bindUnservable binds the spec's admission rules of a plugin that no
// version serves to calls that fail with why.
func (m *Manager) bindUnservable(name string, cur *loaded, sp Spec, why error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur.admission = admissionBindings(name, nil, sp, fmt.Errorf("no module serves it: %w", why))
	m.plugins[name] = cur
	m.publishLocked()
}

// unservableCaller fails every call with err.
type unservableCaller struct{ err error }

func (c unservableCaller) Reconcile(context.Context, *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return nil, c.err
}

func (c unservableCaller) Admit(context.Context, *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return nil, c.err
}

func (c unservableCaller) Finalize(context.Context, *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return nil, c.err
}
