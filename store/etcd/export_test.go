package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// SetProgressRequests turns on-demand progress requests on or off, whatever
// the server's version.
func SetProgressRequests(db *DB, on bool) { db.progressRequests = on }

// ClientConfig is the etcd client configuration Open uses for opts.
func ClientConfig(opts Options) clientv3.Config { return clientConfig(opts.withDefaults()) }

// SetFeedRing sets how many events a feed started from now on keeps at
// least.
func SetFeedRing(db *DB, n int) { db.feedRing = n }

// FeedFloor is the revision after which db's feed holds or awaits every
// event, 0 without a feed.
func FeedFloor(db *DB) int64 {
	db.feedMu.Lock()
	defer db.feedMu.Unlock()
	if db.feed == nil {
		return 0
	}
	db.feed.mu.Lock()
	defer db.feed.mu.Unlock()
	return db.feed.floor
}

// EtcdWatches is how many etcd watches db has opened.
func EtcdWatches(db *DB) int64 { return db.etcdWatches.Load() }
