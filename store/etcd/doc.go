// Package etcd is the distributed backend of the store contract, on an etcd
// cluster through go.etcd.io/etcd/client/v3.
//
// The store's revision is etcd's revision: every write is one etcd
// transaction, compare-and-swap compares the key's create or mod revision,
// reads at a revision are etcd reads at that revision, and watches are etcd
// watches with the previous document. Compaction is etcd's, so it is global:
// several stores sharing one etcd under different prefixes share one
// history, and a compaction by one compacts all.
//
// Every key is stored under Options.Prefix (default /setpoint), so that
// several installations can share one etcd; keys must begin with a slash, as
// store.ObjectKey builds them, so that one prefix never matches another
// installation's longer one.
//
// # Goroutines
//
// Each watcher has one goroutine that moves the etcd watch's responses into
// its Events channel, keeping at most Options.WatchBuffer events waiting; it
// owns the watcher's pending events and ends when the watcher stops, its
// context is done, or the store closes. The background compactor goroutine,
// when enabled, compacts history older than the window. Close stops them all
// and waits for them before closing the etcd client.
//
// It must not import anything of Setpoint's but the store contract.
package etcd
