// Package store defines the contract of Setpoint's versioned object store: the
// source of truth behind the API.
//
// A store holds JSON documents under string keys and owns one global revision
// that every create, update and delete advances by exactly one. Reads hand the
// revision back, writes compare-and-swap on it, and Watch replays history from any
// revision still kept and then follows live writes in revision order.
//
// Keys are paths built by ObjectKey and ResourcePrefix, so that a List or Watch
// over a prefix selects one resource, optionally within one namespace. What the
// server keeps for itself and never serves (uploaded modules, read-schema
// records, its identity) lives under PrivatePrefix, built by PrivateKey, which
// no resource key can begin with.
//
// This package owns the contract, its errors and its event types. It imports
// nothing of Setpoint's: backends live in store/badger and store/etcd, and the one
// conformance suite they all pass lives in store/storetest.
package store
