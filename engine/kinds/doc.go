// Package kinds is the registry of the kinds Setpoint serves and everything
// that is per kind: the built-in kinds (Namespaces, Events and
// CustomResourceDefinitions) and the kinds each CRD registers, their REST
// strategies, structural schemas and the validation, defaulting, pruning and
// coercion built from them (the apiextensions libraries, with Setpoint's
// bounded validation in front of them), server-side apply's field managers,
// printer columns, and the stored and served encoding of objects: how an
// object is written to the store, read back through the schemas of the CRD
// it was stored under (ReadSchemas), and served as JSON.
//
// A Registry holds the served Kinds by resource and the CRDs that registered
// them; a Kind is a Resource (what routing, discovery and clients need to
// know) with its strategy and schemas. Kinds hold no per-object state and
// are replaced, never changed, when their CRD changes: a caller that took a
// Kind may keep using it for the rest of its request.
//
// The package knows nothing of the object service that uses it: it does not
// touch the store (it only encodes and decodes its documents) and must not
// import engine, engine/apiserver, engine/controller or engine/plugins
// (test/layout_test.go checks this).
//
// # State
//
// A Registry is safe for concurrent use: its RWMutex guards the served
// kinds, the CRDs and their read schemas; the field managers it keeps per
// CRD, reused while the CRD's schemas stay the same, are in a sync.Map of
// their own. Each Kind of a built-in kind makes its field managers once, on
// first use. DecodeCache, the cache watches share to decode each stored
// document once, has its own lock. The package has no goroutines and no
// process-wide mutable state.
package kinds
