// Package engine owns Setpoint's object service: the Service that every
// write goes through (the REST API, controllers, the garbage collector) and
// the reads beside it. Its write pipeline (write.go, apply.go, patch.go,
// delete.go, scale.go) takes each write through type checks, coercion,
// mutating admission, the kind's strategy and validation, field management,
// the size bound and the store; list*.go and watch*.go read and follow the
// store. What is per kind (the registry of served kinds, strategies,
// schemas, field managers, stored and served encoding) is package
// engine/kinds; the engine adds the per-kind hooks that need the service
// (hooks.go: namespaces, CRDs), keeps the registry in step with stored CRDs
// (crd.go, run.go), stores the records of CRDs' read schemas
// (readrecord.go) and creates the CRDs of kinds the server itself relies on,
// Plugins and Leases (systemcrd.go). It also runs the admission seam and
// finalizers. The garbage collector is a controller over the Service
// (package engine/gc, started beside it by the server's wiring); engine
// never imports it, and gives it what no client may do (collectorapi.go).
//
// Objects are unstructured and stored as JSON through the store contract
// (package store) only: engine never imports a concrete backend. Errors are
// *k8s.io/apimachinery/pkg/api/errors.StatusError values, so that any caller
// can hand them to a Kubernetes client unchanged.
//
// # Threads
//
// Service.Run runs the Service's one long-lived goroutine, the CRD follower,
// which watches CustomResourceDefinition objects in the store and keeps the
// registry in step with writes made elsewhere (another replica, a restore),
// and returns after it stops. Each Watch call starts one goroutine that owns
// its store watcher, stops it when it ends (the store watcher is not tied
// to the watch's context), and ends when the watch is stopped or its
// context is done; in sink mode (Deliver, DeliverFlushed) it also calls the
// consumer's functions, which is how the HTTP watch writes its events with
// no goroutine of its own between the watch and the connection. A change of a CRD's schemas stores the revision of its new read
// schemas after a delay (readrecord.go), on a timer the Service owns: Run
// cancels those still waiting when it returns and waits for those running,
// and Close does so for good, so that none writes to a store closed after
// the Service. The registry is guarded by its own locks (package
// engine/kinds).
package engine
