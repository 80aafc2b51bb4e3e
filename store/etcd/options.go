package etcd

import (
	"crypto/tls"
	"io"
	"log/slog"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// DefaultPrefix is the default of Options.Prefix.
const DefaultPrefix = "/setpoint"

// Options tunes a DB. The zero value of every field but Endpoints gets a
// default.
type Options struct {
	// Endpoints are the etcd client URLs (http://host:2379 or https://...).
	Endpoints []string
	// TLS, when set, is the client's TLS configuration (CA, client
	// certificate) for https endpoints.
	TLS *tls.Config
	// Prefix is put before every key, so that several installations share
	// one etcd. Default: /setpoint. A trailing slash is dropped; "/" means
	// no prefix.
	Prefix string
	// DialTimeout bounds connecting to etcd in Open. Default: 10 seconds.
	DialTimeout time.Duration
	// RequestTimeout bounds each request to etcd whose context has no
	// deadline, so that an unreachable etcd fails requests rather than
	// hanging them. Default: 30 seconds.
	RequestTimeout time.Duration
	// KeepAliveTime is how long the client's gRPC connection to etcd may
	// be quiet before the client pings it, and KeepAliveTimeout how long
	// it then waits for the answer before it closes the connection and
	// dials again: without them, an etcd whose host vanished (no FIN, no
	// RST) leaves watches hanging on a dead connection until the kernel
	// gives up, many minutes later. Defaults: 30 and 10 seconds, as
	// kube-apiserver's. gRPC raises a KeepAliveTime under 10 seconds to
	// 10 seconds, and etcd answers pings more often than its
	// --grpc-keepalive-min-time (5 seconds) by closing the connection.
	KeepAliveTime    time.Duration
	KeepAliveTimeout time.Duration

	// Logger receives the store's logs. Default: discard.
	Logger *slog.Logger

	// WatchBuffer is how many events each watcher may have waiting; one
	// further behind is ended with store.ErrWatcherTooSlow. The first 16
	// wait in its channel, the rest in a buffer grown on demand.
	// Default: store.DefaultWatchBuffer.
	WatchBuffer int
	// ProgressInterval is how often a watcher asks etcd for its progress
	// (Watcher.Progress) while Progress is being called, on etcd servers that
	// answer such requests in order (3.4.25, 3.5.8 and later); older
	// servers send progress only at their own
	// --experimental-watch-progress-notify-interval. Default: 1 second.
	ProgressInterval time.Duration

	// CompactionWindow, CompactionMinRevisions and CompactionInterval work
	// as in store/badger: every CompactionInterval, history is compacted to
	// the newest revision both older than CompactionWindow and
	// CompactionMinRevisions behind the current one. Defaults: 5 minutes,
	// 10,000 and 1 minute. Negative CompactionInterval disables background
	// compaction (for an etcd whose own --auto-compaction does it).
	CompactionWindow       time.Duration
	CompactionMinRevisions int64
	CompactionInterval     time.Duration
	// Now is the clock of background compaction. Default: time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	for len(o.Prefix) > 0 && o.Prefix[len(o.Prefix)-1] == '/' {
		o.Prefix = o.Prefix[:len(o.Prefix)-1]
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.KeepAliveTime <= 0 {
		o.KeepAliveTime = 30 * time.Second
	}
	if o.KeepAliveTimeout <= 0 {
		o.KeepAliveTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = store.DefaultWatchBuffer
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	if o.CompactionWindow == 0 {
		o.CompactionWindow = 5 * time.Minute
	}
	if o.CompactionMinRevisions == 0 {
		o.CompactionMinRevisions = 10_000
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
