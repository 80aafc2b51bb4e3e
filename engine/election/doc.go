// Package election is leader election over coordination.k8s.io/v1 Leases:
// when several replicas share one store, each controller (each plugin's
// reconcile controller, the garbage collector) runs on exactly one of them
// at a time. Each controller has a Lease of its own, so that controllers
// spread over the replicas.
//
// controller.Manager elects its controllers through Leases.Electors; Run
// runs a single loop, such as the garbage collector, while it leads.
//
// Leases are served as a kind through a CustomResourceDefinition with the
// schema of LeaseSpec (EnsureKind), so `kubectl get leases` shows who leads
// what. An Elector implements controller.Elector over one Lease, through
// the object service's Get, Create and Update, every write a
// compare-and-swap on the resourceVersion read. It follows client-go's
// leaderelection: holderIdentity, leaseDurationSeconds, acquireTime,
// renewTime and leaseTransitions mean what they mean in Kubernetes; a
// candidate takes a lease whose holder is empty (released) at once, and
// one held by another replica only when it has not changed for its
// duration, measured on the candidate's own clock from when it saw it
// change (never from the holder's renewTime, so clocks need not agree). It
// does not import client-go.
//
// # Safety
//
// A leader renews its lease every RetryPeriod. Its leadership (the context
// Lead returns) ends RenewDeadline after the start of the last renewal that
// succeeded, ended by a timer rather than by the renewal calls, so a write
// stalled in a cut-off store cannot hold it up. That renewal wrote the
// lease no earlier than it started, so no other replica saw the lease
// change before then, and none takes it over before LeaseDuration after
// that. RenewDeadline is less than LeaseDuration (Options enforces it), so
// a leader that cannot renew, partitioned from the store above all, stops
// at least LeaseDuration-RenewDeadline before another can start: that gap
// is the time its workers have to notice their cancelled context, and it
// never writes as a stale leader unless it is stalled longer than that
// (the assumption of every lease, client-go's included). A write that
// races its own loss is a compare-and-swap on a lease the next leader
// rewrites, so it cannot take the lease back unseen.
//
// A leader whose Lead context's parent ends releases the lease (empties
// holderIdentity), so that another replica takes over within a retry
// period instead of a lease duration. Its caller ends that parent only
// after the work the lease guards has stopped: controller.Manager does.
//
// # Threads
//
// Lead runs in its caller's goroutine until it leads. Then one leadership
// goroutine per Lead renews the lease and owns the Elector's record of it
// until it ends: when the parent context ends (after releasing the lease)
// or when leadership is lost. A timer of that goroutine (time.AfterFunc)
// ends leadership. The next Lead of the same Elector waits for the previous
// leadership goroutine; Leases.Wait waits for all of them. Run runs its
// loop in its caller's goroutine, one term after another.
package election
