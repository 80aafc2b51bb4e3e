// Package gc is Setpoint's garbage collector: a controller over the object
// service (package engine) that runs beside it, as Kubernetes runs its
// collector in the kube-controller-manager beside the API server. The
// server's wiring builds it with New on the Service and the store the
// Service serves from, and runs it with Run; engine never imports it.
//
// The collector deletes dependents whose owners are all gone, drops owner
// references to owners that are gone while others remain, removes the owner
// references of an owner deleted with Orphan and then its orphan finalizer,
// deletes the dependents of an owner deleted with Foreground and removes its
// foregroundDeletion finalizer once no blocking dependent is left, deletes
// the content of a terminating namespace (and objects whose namespace is
// gone) and then removes kubernetes from its spec.finalizers through the
// namespace's finalize subresource, keeping the namespace's conditions as
// Kubernetes' namespace controller does, cleans up after a deleted CRD
// (crdcleanup.go), finishes deletions left without finalizers, and deletes
// Events last updated more than Options.EventTTL ago. An owner that seems
// missing is looked up again before anything is deleted, so an object
// created meanwhile is never collected.
//
// It reads the store through the store contract, because what it keeps is an
// index of the whole keyspace at one revision (a list, then a watch of every
// key from that revision), built from the metadata of the stored bytes
// (engine.DecodeStoredMeta) without decoding whole objects. Every write goes
// through the Service: deletes with preconditions, owner references and
// finalizers removed by read-modify-write under FieldManager, a namespace's
// through engine.Service.UpdateFinalize, conditions through status updates,
// and the two writes no client may make
// (engine.Service.FinishDeletion, engine.Service.PurgeResource).
//
// The work is incremental (collector.go): an ownership graph (graph.go) fed
// by the store's watch queues, for each change, only the objects it may have
// made collectable. A full mark-and-sweep of every stored object (sweep)
// runs every Options.SweepInterval as a safety net, and Events are expired
// by a pass over Events only.
//
// # Threads
//
// Run starts every goroutine of the collector and returns after all of them
// have stopped, once its context is done:
//   - the follower (follow) lists every served resource into a new graph,
//     then watches the whole keyspace from that revision and applies each
//     event to the graph, queueing the uids the event may have made
//     collectable; it owns its store watcher, and lists again when the watch
//     cannot resume. It alone writes the graph, under Collector.mu.
//   - two workers (work) take uids from the queue and attempt each
//     collection, reading the graph under mu's read lock (a node is never
//     changed once in the graph: a change replaces it) and the store, and
//     writing through the Service; a failed attempt is queued again with
//     backoff.
//   - the periodic loop runs the sweep and the Event expiry.
//
// Run shuts the queue down when its context is done, so the workers return,
// and waits for the three kinds of goroutine. One Run at a time; a later Run
// starts with a new queue and a new list.
package gc
