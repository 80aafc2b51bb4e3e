// Package engine owns Setpoint's object layer: the Service that every write
// path goes through (the REST API, controllers, the garbage collector), the
// registry of served kinds (built-in Namespaces, Events and
// CustomResourceDefinitions, plus every kind a CRD registers), schema
// validation, defaulting and pruning through the apiextensions libraries, the
// admission seam, finalizers and the garbage collector.
//
// Objects are unstructured and stored as JSON through the store contract
// (package store) only: engine never imports a concrete backend. Errors are
// *k8s.io/apimachinery/pkg/api/errors.StatusError values, so that any caller
// can hand them to a Kubernetes client unchanged.
//
// # Threads
//
// Service.Run starts the long-lived goroutines and returns after all stop:
// the CRD follower, which watches CustomResourceDefinition objects in the
// store and keeps the registry in step with writes made elsewhere (another
// replica, a restore); the garbage collector's follower, which lists and then
// watches the whole keyspace into its ownership graph (gcgraph.go) and queues
// what each change may make collectable, and its two workers, which collect
// (dependents of deleted owners, orphan and foreground deletion, terminating
// namespaces, the objects of a CRD being deleted and then the CRD itself,
// deletions left without finalizers); and the loop of the periodic passes:
// the full sweep every GCInterval as a safety net, and the expiry of Events.
// The graph is guarded by the collector's RWMutex. Each Watch call starts
// one goroutine that owns its store watcher and ends when the watch is
// stopped or its context is done. The registry is guarded by its own
// RWMutex.
package engine
