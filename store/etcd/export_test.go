package etcd

// SetProgressRequests turns on-demand progress requests on or off, whatever
// the server's version.
func SetProgressRequests(db *DB, on bool) { db.progressRequests = on }
