package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// SetProgressRequests turns on-demand progress requests on or off, whatever
// the server's version.
func SetProgressRequests(db *DB, on bool) { db.progressRequests = on }

// ClientConfig is the etcd client configuration Open uses for opts.
func ClientConfig(opts Options) clientv3.Config { return clientConfig(opts.withDefaults()) }

// EtcdWatches is how many etcd watches db has opened.
func EtcdWatches(db *DB) int64 { return db.etcdWatches.Load() }
