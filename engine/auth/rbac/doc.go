// Package rbac is Kubernetes' role-based access control over the objects of
// the engine: the authorizer and rule resolver (Authorizer), the cache of
// Roles, ClusterRoles and their bindings it decides from, the default roles
// every server ensures (EnsureDefaults), the aggregation of ClusterRoles
// (aggregationRule), and the escalation checks on writes of the RBAC kinds
// (Escalation, an admission step).
//
// Rules are evaluated as Kubernetes' RBAC authorizer evaluates them: a
// request is allowed when a rule of a role bound to the user, to one of its
// groups, or to its ServiceAccount allows it; ClusterRoleBindings grant
// everywhere, RoleBindings only in their namespace; anything else gets no
// opinion (deny by default). The escalation checks use the policy comparator
// of k8s.io/component-helpers, and default roles its reconciliation.
//
// It reaches objects only through the Client interface it declares, which
// the engine's object service implements; it imports neither the store nor
// the HTTP layers.
//
// # Threads
//
// Authorizer.Run runs one client-go informer per RBAC kind, each with its
// goroutine, and the aggregation loop; their handlers update the
// Authorizer's index under its lock, and the aggregation loop writes
// ClusterRoles through the Client. Run returns after all of them stopped.
// Decisions read the index under a read lock and never read the store.
package rbac
