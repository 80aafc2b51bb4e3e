package plugins

import (
	"context"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Host loads and runs plugin modules; cmd adapts the Wasm host's registry to
// it. Errors of Check and Install say what is wrong with a module. Check
// and Stage get wasm with its digest, which the caller computed from the
// bytes or checked them against (Modules.Get does), so that a module is
// not hashed again on its way to serving.
type Host interface {
	// Check compiles and checks wasm (exports, ABI version, imports, memory
	// limit) without serving it.
	Check(ctx context.Context, wasm []byte, digest string, cfg Config) error
	// Stage loads wasm as a candidate version of the plugin name without
	// serving it: compiled, its ABI version and handlers read and its first
	// instance initialized, within cfg's limits. The version serving now
	// keeps serving until the candidate is committed (see Candidate). A
	// refused module gives an error and no candidate.
	Stage(ctx context.Context, name string, wasm []byte, digest string, cfg Config) (Candidate, error)
	// Remove retires the plugin name; its calls in flight finish.
	Remove(name string)
	// Caller returns a stable reference to the plugin name that always
	// calls its current version.
	Caller(name string) Caller
}

// ModuleForgetter is implemented by a Host that caches what it derived from
// a module under the module's digest; the ModuleGC calls it when it deletes
// the module.
type ModuleForgetter interface {
	ForgetModule(digest string)
}

// Caller calls one plugin's exports.
type Caller interface {
	Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error)
	Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error)
	Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error)
}

// Config is what the host loads a module with. Zero values get the host's
// defaults.
type Config struct {
	CallTimeout time.Duration
	MemoryPages uint32
	PoolSize    int
	// Read lists the kinds the plugin may get and list, as "Kind.group"
	// ("Kind" for the core group), or "*".
	Read []string
	// Write lists the kinds the plugin may create, update, patch and
	// delete, named like Read, or "*".
	Write []string
	// Events allows the emit_event host function.
	Events bool
	// Egress is what the plugin may reach over HTTP; nil grants nothing.
	Egress *EgressConfig
}

// Exports are the handlers a loaded module provides.
type Exports struct {
	Reconcile, Admit, Finalize bool
	// Preemption says how the host stops the module's calls at their
	// deadline, and why when it is the slow path; empty when unknown.
	Preemption string
	// Tier, when set, says which code serves the module's calls while the
	// host compiles it in the background; nil when it ran compiled from
	// the start.
	Tier Tier
}

// Tier reports the code that serves a version loaded on an interpreter
// first: "interpreter" until its background compile is done, then
// "compiled"; TierError says why a version stays on the interpreter.
type Tier interface {
	Tier() string
	TierError() string
}
