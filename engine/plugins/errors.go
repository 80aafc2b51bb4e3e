package plugins

import "errors"

// Sentinel errors.
var (
	// ErrModuleNotFound: no module with that digest was uploaded.
	ErrModuleNotFound = errors.New("plugins: module not found")
	// ErrModuleInUse: a module Plugins use cannot be deleted; the error is
	// a *ModuleInUseError naming them.
	ErrModuleInUse = errors.New("plugins: module in use")
	// ErrInvalidSpec: a Plugin's spec cannot be used as is.
	ErrInvalidSpec = errors.New("plugins: invalid spec")
	// ErrNotServed: a binding names a resource the server does not serve.
	ErrNotServed = errors.New("plugins: resource not served")
	// ErrReconcileConflict: another Plugin, created first, reconciles the
	// kind a Plugin's reconcile binding names.
	ErrReconcileConflict = errors.New("plugins: kind reconciled by another Plugin")
)
