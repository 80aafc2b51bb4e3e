// Command setpoint is Setpoint's one binary: `setpoint server` runs the control
// plane, and the client verbs (get, apply, ...) talk to a running one.
//
// # Wiring
//
// `setpoint server` is the one place where the parts of the control plane
// are built and given to one another: the concrete store backend, the
// engine, the Wasm host, the plugin manager and the API server meet here,
// and no part builds another or reaches into one through an accessor.
// runServer opens the store the flags name (Badger, or etcd), prepares the
// serving identity kept in it, and calls newPluginAPI, which builds in this
// order:
//
//   - the plugins' admission chain (plugins.NewAdmitter);
//   - the engine on the store, with that chain from the start
//     (engine.Options.Admitter);
//   - the Wasm host, whose object and event calls go to the engine, and its
//     registry of serving versions;
//   - the plugin manager, which keeps the admission chain in step with the
//     Plugin objects (plugins.Options.Admitter);
//   - the API server over the engine, with the module upload, the Plugins'
//     log subresource and the snapshot endpoint as routes on its router
//     (apiserver.Options.Routes).
//
// runServer then puts the serving layers (request log, metrics,
// authentication, in-flight limits and timeouts) around the API server, so
// that every request, a module upload as much as a list, passes the same
// ones in the same order.
//
// # Threads
//
// runServer starts every long-lived goroutine of the server and waits for
// each on shutdown:
//
//   - the HTTP server, which stops taking connections and drains first;
//   - pluginAPI.Run, which runs the engine's loops, the plugin manager, the
//     controllers of reconcile bindings and the expiry of the version the
//     last upload checked (checkedVersion), waits for all of them, then
//     closes the engine (ending its delayed writes), every plugin version
//     and the host;
//   - with --examples, the loader of the example kinds and plugins.
//
// The loops get what is left of --shutdown-timeout, at least minLoopsStop;
// a plugin call stuck in a guest that ignores cancellation is abandoned
// then (waitLoops) rather than holding the process. The store is closed
// last.
//
// The one process-wide setting is gRPC's logger, which the etcd client
// logs through: gRPC keeps one per process, settable only before gRPC runs,
// so openEtcd sets it once (grpcLogOnce).
package main
