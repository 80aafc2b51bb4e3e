package etcd

// SetProgressRequests turns on-demand progress requests on or off, whatever
// the server's version.
func SetProgressRequests(db *DB, on bool) { db.progressRequests = on }

// EtcdWatches is how many etcd watches db has opened.
func EtcdWatches(db *DB) int64 { return db.etcdWatches.Load() }
