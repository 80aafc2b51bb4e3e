package plugins

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Spec is a Plugin's spec.
type Spec struct {
	Module      ModuleRef         `json:"module"`
	Reconcile   *ReconcileBinding `json:"reconcile,omitempty"`
	Admission   []AdmissionRule   `json:"admission,omitempty"`
	Permissions Permissions       `json:"permissions,omitempty"`
	Limits      SpecLimits        `json:"limits,omitempty"`
	Config      map[string]string `json:"config,omitempty"`
	// Privileged, set by an administrator, lets the plugin write the
	// resources that can grant privileges (see privilegedResource).
	Privileged bool `json:"privileged,omitempty"`
	// Egress grants the plugin HTTP calls to the outside world; nil grants
	// none (see egress.go).
	Egress *EgressSpec `json:"egress,omitempty"`
}

// ModuleRef names a module by digest.
type ModuleRef struct {
	Digest string `json:"digest"`
}

// ReconcileBinding is the kind a plugin reconciles and its children's kinds.
type ReconcileBinding struct {
	For  string   `json:"for"`
	Owns []string `json:"owns,omitempty"`
	// Workers is how many objects are reconciled at once; 0 gets
	// DefaultWorkers.
	Workers int `json:"workers,omitempty"`
}

// MaxWorkers bounds spec.reconcile.workers.
const MaxWorkers = 256

// DefaultWorkers is how many objects a plugin's controller reconciles at
// once unless its spec says: four times the cores the server may use, at
// least 16. A reconcile mostly waits for its writes to become durable
// (three commits one after another for a child and two status writes), so
// several workers per core keep the cores busy, and the more writes wait
// together the larger the store's commit groups and the less CPU each
// write costs: on 2 cores, 16 and 32 workers converged 1.5-2x more objects
// per second than 4, at 35-50% less CPU per object (BenchmarkReconcile with
// SETPOINT_BENCH_WORKERS). Each call still needs one of the plugin's
// instances (spec.limits.poolSize), so the CPU the guest itself uses stays
// bounded by the pool.
func DefaultWorkers() int { return min(MaxWorkers, max(16, 4*runtime.GOMAXPROCS(0))) }

// Admission binding types and failure policies.
const (
	Mutating   = "Mutating"
	Validating = "Validating"
	Fail       = "Fail"
	Ignore     = "Ignore"
)

// AdmissionRule binds a plugin's admit export to writes.
type AdmissionRule struct {
	Resources     []string `json:"resources"`
	Operations    []string `json:"operations,omitempty"`
	Type          string   `json:"type"`
	FailurePolicy string   `json:"failurePolicy,omitempty"`
}

// Permissions are what a plugin may reach through host functions.
type Permissions struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
}

// SpecLimits bound a plugin's calls and instances.
type SpecLimits struct {
	CallTimeout string `json:"callTimeout,omitempty"`
	MemoryPages uint32 `json:"memoryPages,omitempty"`
	PoolSize    int    `json:"poolSize,omitempty"`
}

// config is the part of the host configuration the limits give.
func (l SpecLimits) config() (Config, error) {
	cfg := Config{MemoryPages: l.MemoryPages, PoolSize: l.PoolSize}
	if l.CallTimeout != "" {
		d, err := time.ParseDuration(l.CallTimeout)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("callTimeout %q is not a positive duration (e.g. 500ms)", l.CallTimeout)
		}
		cfg.CallTimeout = d
	}
	return cfg, nil
}

// specOf decodes a Plugin's spec.
func specOf(obj *unstructured.Unstructured) (Spec, error) {
	var sp Spec
	raw, ok := obj.Object["spec"]
	if !ok {
		return sp, fmt.Errorf("%w: spec is missing", ErrInvalidSpec)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return sp, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return sp, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if !validDigest(sp.Module.Digest) {
		return sp, fmt.Errorf("%w: spec.module.digest %q is not sha256: and 64 lower-case hex digits", ErrInvalidSpec, sp.Module.Digest)
	}
	return sp, nil
}

// hostConfig is the configuration the host loads the module with.
func (sp Spec) hostConfig(svc *engine.Service) (Config, error) {
	cfg, err := sp.Limits.config()
	if err != nil {
		return cfg, fmt.Errorf("%w: spec.limits.%w", ErrInvalidSpec, err)
	}
	if sp.Egress != nil {
		var errs field.ErrorList
		if cfg.Egress, errs = sp.Egress.config(cfg.CallTimeout); len(errs) > 0 {
			return cfg, fmt.Errorf("%w: %w", ErrInvalidSpec, errs.ToAggregate())
		}
	}
	for _, r := range sp.Permissions.Read {
		if r == "*" {
			cfg.Read = append(cfg.Read, "*")
			continue
		}
		res, err := resolve(svc, r)
		if err != nil {
			return cfg, fmt.Errorf("spec.permissions.read: %w", err)
		}
		cfg.Read = append(cfg.Read, groupKind(res.GVK().GroupKind()))
	}
	// "events" is the emit_event permission (not the Event kind), "*" every
	// kind and events; any other entry names a kind as read does.
	for _, w := range sp.Permissions.Write {
		switch w {
		case "events":
			cfg.Events = true
		case "*":
			cfg.Events = true
			cfg.Write = append(cfg.Write, "*")
		default:
			res, err := resolve(svc, w)
			if err != nil {
				return cfg, fmt.Errorf("spec.permissions.write: %w", err)
			}
			cfg.Write = append(cfg.Write, groupKind(res.GVK().GroupKind()))
		}
	}
	return cfg, nil
}

// groupKind is "Kind.group", or "Kind" for the core group: how the host and
// the ABI name kinds.
func groupKind(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// resolve finds the served resource named "plural.group" ("plural" for the
// core group), at its preferred version; one not served yet is looked for
// again after catching up with CRDs another server stored.
func resolve(svc *engine.Service, name string) (kinds.Resource, error) {
	gr := schema.ParseGroupResource(name)
	for _, resources := range []func() []kinds.Resource{svc.Resources, svc.CaughtUpResources} {
		for _, r := range resources() { // preferred version first
			if r.GVR.GroupResource() == gr {
				return r, nil
			}
		}
	}
	return kinds.Resource{}, fmt.Errorf("%w: %q", ErrNotServed, name)
}

// controllerKind is the controller.Kind of a served resource.
func controllerKind(r kinds.Resource) controller.Kind {
	return controller.Kind{Resource: r.GVR, Kind: r.Kind, Namespaced: r.Namespaced}
}

func validDigest(d string) bool {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
