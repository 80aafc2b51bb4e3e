package host

import (
	"errors"
	"fmt"
)

// Sentinel errors; compare with errors.Is. Errors of a call are wrapped in a
// *CallError that names the plugin and the export.
var (
	// ErrTimeout: the call passed its deadline and the guest was stopped.
	ErrTimeout = errors.New("host: timeout")
	// ErrMemoryLimit: the guest needed more memory than its cap.
	ErrMemoryLimit = errors.New("host: memory limit")
	// ErrTrap: the guest trapped or its runtime exited.
	ErrTrap = errors.New("host: trap")
	// ErrGuestPanic: the guest reported a failure (a recovered panic, input
	// it could not read, a handler it lacks).
	ErrGuestPanic = errors.New("host: guest failure")
	// ErrBadOutput: the guest's output is too large, out of bounds or not a
	// valid response document.
	ErrBadOutput = errors.New("host: bad output")
	// ErrHostCallLimit: the guest made more host calls than a call's budget.
	ErrHostCallLimit = errors.New("host: host-call budget exhausted")
	// ErrMissingExport: the module lacks an export the ABI requires.
	ErrMissingExport = errors.New("host: missing export")
	// ErrInvalidModule: the bytes are not a valid Wasm module, or the module
	// does not fit its limits.
	ErrInvalidModule = errors.New("host: invalid module")
	// ErrUnsupportedABI: the module was built for an ABI version this host
	// does not support.
	ErrUnsupportedABI = errors.New("host: unsupported ABI version")
	// ErrUnknownImport: the module imports a function the host does not
	// offer.
	ErrUnknownImport = errors.New("host: unknown import")
	// ErrNoHandler: the plugin does not provide the handler called.
	ErrNoHandler = errors.New("host: plugin has no such handler")
	// ErrPermissionDenied: a host call the plugin's permissions do not
	// allow; the guest sees it as the error of that host call.
	ErrPermissionDenied = errors.New("host: permission denied")
	// ErrOverBudget: a plugin's limits, or an instance it needs, exceed the
	// server's budget (Options.Budget).
	ErrOverBudget = errors.New("host: over the server's budget")
	// ErrClosed: the host or plugin is closed.
	ErrClosed = errors.New("host: closed")
	// ErrNotFound: the registry has no plugin of that name.
	ErrNotFound = errors.New("host: plugin not found")
)

// CallError is the error of one call into a plugin.
type CallError struct {
	Plugin string
	Export string
	// Err is one of the sentinels above, or a context error.
	Err error
	// Detail is what the guest or runtime said, when anything.
	Detail string
}

func (e *CallError) Error() string {
	msg := fmt.Sprintf("plugin %q %s: %v", e.Plugin, e.Export, e.Err)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *CallError) Unwrap() error { return e.Err }

// ModuleError is why a module was refused at load time.
type ModuleError struct {
	Plugin string
	Err    error
	Detail string
}

func (e *ModuleError) Error() string {
	return fmt.Sprintf("plugin %q: %v: %s", e.Plugin, e.Err, e.Detail)
}

func (e *ModuleError) Unwrap() error { return e.Err }
