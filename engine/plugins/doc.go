// Package plugins makes Wasm plugins a live part of the server: the Plugin
// kind (group setpoint.dev, cluster-scoped), the content-addressed module
// store and its upload endpoint, and the Manager that follows Plugin objects,
// loads and hot-swaps their modules, binds them to admission (an
// engine.Admitter) and to reconciliation (engine/controller controllers), and
// reports what happened in each Plugin's status.
//
// It reaches the Wasm host only through the Host interface it declares; cmd
// adapts the host's registry to it. It must not import host.
//
// # Use
//
// Upload a module, then name it in a Plugin:
//
//	curl --cacert ca.crt -H "Authorization: Bearer $TOKEN" \
//	  -H 'Content-Type: application/wasm' --data-binary @requiredlabels.wasm \
//	  https://127.0.0.1:6443/apis/setpoint.dev/v1alpha1/modules
//	# {"digest":"sha256:…","size":…,"created":true}
//
//	apiVersion: setpoint.dev/v1alpha1
//	kind: Plugin
//	metadata: {name: required-labels}
//	spec:
//	  module: {digest: "sha256:…"}
//	  admission:
//	  - {resources: [widgets.example.setpoint.dev], operations: [CREATE, UPDATE], type: Validating}
//	  config: {labels: team}
//
// Changing spec.module.digest swaps the running version atomically, once the
// new one is staged (compiled, ABI version and memory checked, init run) and
// its exports cover every binding of the spec; a module that is refused,
// missing or lacks a bound export leaves the running version serving, and
// the status's Loaded condition says why. An admission rule no module can
// serve fails its calls, so failurePolicy Fail refuses the writes it covers.
// A spec may name resources that can grant privileges (Plugins, CRDs, RBAC)
// for writing only with spec.privileged. `setpoint plugin install` does both
// steps.
//
// Modules no Plugin uses (in spec.module.digest or status.loadedDigest) are
// deleted after a grace period by the ModuleGC; GET ModulesPath lists the
// stored modules and their users, DELETE ModulesPath/sha256:... deletes an
// unused one at once. Modules live among the server's private store keys
// (store.PrivatePrefix), out of every resource's reach; MigrateModules,
// which the server runs on start, moves those an earlier version kept under
// keys shaped like resources of setpoint.dev.
//
// The group setpoint.dev is the server's own, as Kubernetes keeps its
// groups: the Admitter refuses every other CustomResourceDefinition in it
// but the Plugin kind's.
//
// A plugin acts as its own user, PluginUser(name): its host-call writes,
// events, and the children, status and finalizers of its reconcile are
// admitted as that user and, given an Auditor, recorded in the server's
// audit log. Its permissions are RBAC rules, a ClusterRole the manager
// keeps from the spec and binds to that user (RoleName); given an
// authorizer, every read, watch and write the plugin makes is decided by
// it as that user, after the host's check of the spec, so an
// administrator narrows what a plugin does by editing its roles, and only
// a Plugin's spec, which its installer must hold, widens it.
//
// # Threads
//
// Manager.Run runs one engine/controller Controller for the Plugin kind
// itself (its worker loads modules and writes status) inside a
// controller.Manager it owns, next to the controllers of the plugins'
// reconcile bindings, and the ModuleGC's loop (one pass every
// ModuleGCInterval; the passes and explicit deletes are serialized by the
// ModuleGC's mutex), and returns once all of them have stopped. The
// Admitter holds an immutable snapshot of the admission bindings behind an
// atomic pointer; the Manager replaces the snapshot after each change, so a
// write in flight finishes with the bindings it started with.
package plugins
