// Package host runs Setpoint's Wasm plugins. It owns the wazero runtimes,
// the on-disk compilation cache, module validation, one instance pool per
// loaded plugin version, the sandbox limits (memory cap, call deadline with
// preemption, host-call budget), the host functions (log, get, list, emit
// event, and create, update, patch and delete outside admission) checked
// against each plugin's permissions, both guest ABIs (the native ABI of
// sdk/guest and the Extism ABI through extism/go-sdk), and the Registry that
// hot-swaps plugin versions by name.
//
// The engine calls a plugin through interfaces it declares; *Plugin and
// *Handle have the methods it needs (Reconcile, Admit, Finalize). Reads of
// objects go through ObjectReader, writes through ObjectWriter and events
// through EventRecorder, all declared here and implemented by the server:
// host imports sdk/abi, wazero and extism, never the engine or the store.
//
// # Threads
//
//   - Calls run on the caller's goroutine, one call per instance at a time;
//     an instance is taken from its plugin's pool for the call and returned
//     (or discarded after a trap, timeout or memory-cap hit) afterwards.
//   - wazero starts one goroutine per call when preemption is on, to close
//     the instance when the call's context is done; it ends with the call.
//   - Each pool arms a timer (time.AfterFunc) while it has idle instances;
//     it closes instances idle for longer than Limits.IdleTimeout. Close
//     stops it.
//   - A retired plugin version (after Registry.Swap or Close) is closed by
//     the goroutine of its last in-flight call, or by Close itself.
//   - Loads compile on the caller's goroutine after vetting the module
//     (vet.go), at most Options.MaxCompiles at once within
//     Options.CompileMemory (compilegate.go); wazero's compile workers end
//     with the compile, or between functions when the load's context ends.
//   - A version loaded on the interpreter first (Options.InterpreterFirst,
//     tier.go) has one goroutine that compiles its module in the background
//     under the same gate, switches its pool to the compiled code and starts
//     one compiled instance; it owns nothing after that and ends. Closing
//     the version cancels it and waits for it.
//   - After instances whose memory caps add up to 64 MiB were closed, a
//     timer runs debug.FreeOSMemory (budget.go) a moment later, at most
//     every ten seconds.
package host
