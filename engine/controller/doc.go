// Package controller is the reconciliation runtime: a Controller per plugin
// binding keeps its kind converged, and a Manager runs the changing set of
// controllers while this replica leads.
//
// It reaches objects only through the Client interface it declares (the
// engine's object service implements it) and plugins only through Reconciler
// and Finalizer (the Wasm host implements them); it imports neither the store
// backends nor the host.
//
// A Controller is level-triggered. Caches (informers) list and watch the
// `for` kind and each owned kind; the controllers of a Manager share them,
// one per resource and namespace. Any change of an object, or of a child that
// names it as controller in its ownerReferences, enqueues the object's key,
// and a periodic resync enqueues every object. A worker then reconciles from
// the cached state, never from the event:
//
//  1. An object being deleted that carries the controller's finalizer goes to
//     the Finalizer until it reports done; then the finalizer is removed.
//  2. Otherwise the finalizer is added if there is a Finalizer, and the
//     Reconciler gets the object, its observed children by kind, the attempt
//     number (failures since the last success) and the config.
//  3. The engine applies the difference between the desired children it
//     returns and the observed ones: creates, updates and deletes children,
//     each with a controller ownerReference, touching only children this
//     object controls; an up-to-date child is not written.
//  4. The status is the plugin's status with observedGeneration and a Ready
//     condition (True on success, False with a reason and message on error),
//     written through UpdateStatus only when it differs.
//  5. A 409 starts the reconcile over from a fresh read. An error backs off
//     exponentially; a terminal error is not retried until the generation
//     changes (or, for the built-in kinds that have no generation, such as
//     ConfigMaps, the content outside metadata and status). Events (core/v1)
//     record the plugin's events and every change of the Ready condition.
//
// # Threads
//
// Controller.Run starts one goroutine per cache, Options.Workers workers, one
// resync goroutine and Options.Workers event writers (which write the
// workers' events from bounded queues, an aggregation key always to the same
// writer, so that a reconcile never waits for its events), and returns after
// all of them stopped. Under a
// Manager, a cache's goroutine is started by the first controller that needs
// it and stopped, and waited for, by the last one to stop; the caches call
// each controller's handlers in turn, and handlers only add to their
// controller's queue, so one controller never holds up another. The caches own
// their maps under their own locks and hand out shared objects that the
// workers copy before changing. The work queue guarantees that one key is
// reconciled by one worker at a time. Manager.Run starts one goroutine per
// controller and stops it (and waits) when the controller is removed or
// replaced, or when leadership is lost. With ManagerOptions.Electors, each
// controller name also has a campaign goroutine, owned and waited for by
// Manager.Run, that follows the leadership of that controller alone.
package controller
