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
// Service.Run starts two long-lived goroutines and returns after both stop:
// the CRD follower, which watches CustomResourceDefinition objects in the
// store and keeps the registry in step with writes made elsewhere (another
// replica, a restore), and the garbage collector, which sweeps on demand
// (after deletes) and periodically; its sweeps also delete the objects of a
// CRD being deleted and then release the CRD (crdcleanup.go). Each Watch call starts one goroutine that
// owns its store watcher and ends when the watch is stopped or its context is
// done. The registry is guarded by its own RWMutex; nothing else is shared.
package engine
