// Package engine owns Setpoint's object layer: the Service that every write
// path goes through (the REST API, controllers, the garbage collector), the
// registry of served kinds (built-in Namespaces, Events and
// CustomResourceDefinitions, plus every kind a CRD registers), schema
// validation, defaulting and pruning through the apiextensions libraries, the
// admission seam and finalizers. The garbage collector is a controller over
// the Service (package engine/gc, started beside it by the server's wiring);
// engine never imports it, and gives it what no client may do
// (collectorapi.go).
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
// its store watcher and ends when the watch is stopped or its context is
// done. The registry is guarded by its own RWMutex.
package engine
