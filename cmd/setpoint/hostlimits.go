package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	kresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/setpoint-dev/setpoint/host"
)

// hostLimits are the server-wide bounds of the Wasm host: what vetting an
// uploaded module may cost, and what all plugins together may take. Zero
// values leave the host's defaults (docs/RATIONALE.md says why each).
type hostLimits struct {
	guestMemory    string
	maxCallTimeout time.Duration
	maxPoolSize    int
	compileTimeout time.Duration
	maxCompiles    int
	compileMemory  string
	maxFunctions   int
	maxFuncBytes   int
	maxNesting     int
	// interpreterFirst serves a new module on the interpreter while it
	// compiles (host.Options.InterpreterFirst).
	interpreterFirst bool
}

func (l *hostLimits) register(f *pflag.FlagSet) {
	f.StringVar(&l.guestMemory, "plugin-guest-memory", "", "memory all plugin instances together may reserve (each reserves its memory cap), e.g. 4Gi; default half the machine's memory")
	f.DurationVar(&l.maxCallTimeout, "plugin-max-call-timeout", host.DefaultMaxCallTimeout, "longest call timeout a Plugin may set in spec.limits.callTimeout")
	f.IntVar(&l.maxPoolSize, "plugin-max-pool-size", host.DefaultMaxPoolSize, "largest pool of instances a Plugin may set in spec.limits.poolSize")
	f.DurationVar(&l.compileTimeout, "plugin-compile-timeout", host.DefaultCompileTimeout, "how long compiling one uploaded or installed module may take")
	f.IntVar(&l.maxCompiles, "plugin-max-compiles", host.DefaultMaxCompiles, "how many modules may compile at once; others wait")
	f.StringVar(&l.compileMemory, "plugin-compile-memory", "1Gi", "estimated memory the compiles in progress may take together; a module that needs more is refused")
	f.IntVar(&l.maxFunctions, "plugin-max-functions", 0, "most functions a module may define and import (0: 100000)")
	f.IntVar(&l.maxFuncBytes, "plugin-max-function-bytes", 0, "largest function body a module may have, in bytes (0: 1048576)")
	f.IntVar(&l.maxNesting, "plugin-max-nesting", 0, "deepest nesting of blocks, loops and ifs in a module's function (0: 2000)")
	f.BoolVar(&l.interpreterFirst, "plugin-interpreter-first", true, "serve a module not compiled before at once on wazero's interpreter, compile it in the background and move its calls to the compiled code when it is ready")
}

// apply sets the host options the flags give.
func (l *hostLimits) apply(o *host.Options) error {
	if l.guestMemory != "" {
		q, err := kresource.ParseQuantity(l.guestMemory)
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("--plugin-guest-memory %q is not a positive quantity of bytes (e.g. 4Gi)", l.guestMemory)
		}
		o.Budget.GuestMemory = q.Value()
	}
	if l.compileMemory != "" {
		q, err := kresource.ParseQuantity(l.compileMemory)
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("--plugin-compile-memory %q is not a positive quantity of bytes (e.g. 1Gi)", l.compileMemory)
		}
		o.CompileMemory = q.Value()
	}
	o.Budget.MaxCallTimeout, o.Budget.MaxPoolSize = l.maxCallTimeout, l.maxPoolSize
	o.CompileTimeout, o.MaxCompiles = l.compileTimeout, l.maxCompiles
	o.InterpreterFirst = l.interpreterFirst
	o.Vet = host.VetLimits{MaxFunctions: l.maxFunctions, MaxFunctionBytes: l.maxFuncBytes, MaxNesting: l.maxNesting}
	return nil
}
