package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpoint-dev/setpoint/store"
)

// DB is a store on etcd. Open it with Open; it is safe for concurrent use.
type DB struct {
	opts   Options
	log    *slog.Logger
	cli    *clientv3.Client
	prefix string // Options.Prefix, without a trailing slash

	// progressRequests: the server answers RequestProgress in order with
	// the events (see Options.ProgressInterval).
	progressRequests bool
	// lastProgress is when the last progress request went, in Unix
	// nanoseconds (progressDue).
	lastProgress atomic.Int64

	// closeMu: operations hold it for reading while they run, Close for
	// writing, so that Close waits for them.
	closeMu  sync.RWMutex
	closed   atomic.Bool
	closing  chan struct{}   // closed by Close
	closeCtx context.Context // done once Close starts
	stopReqs context.CancelFunc
	watchers sync.WaitGroup
	loops    sync.WaitGroup

	// feed is the shared watch of every key (feed.go), nil while no
	// watch uses one; guarded by feedMu.
	feedMu sync.Mutex
	feed   *feed
	// feedRing is how many events a feed keeps at least; feedRing's
	// value when zero.
	feedRing int
	// etcdWatches counts the etcd watches opened, feeds and watchers.
	etcdWatches atomic.Int64
}

var _ store.Store = (*DB)(nil)

// maxSend is the largest request the client sends; etcd's own
// --max-request-bytes (1.5 MiB by default) is the limit that applies.
const maxSend = 64 << 20

// Open connects to etcd and checks that it answers.
func Open(opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("store/etcd: no etcd endpoints")
	}
	cli, err := clientv3.New(clientConfig(opts))
	if err != nil {
		return nil, fmt.Errorf("store/etcd: connect to %s: %w", strings.Join(opts.Endpoints, ","), err)
	}
	db := &DB{opts: opts, log: opts.Logger, cli: cli, prefix: opts.Prefix, closing: make(chan struct{})}
	db.closeCtx, db.stopReqs = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), opts.DialTimeout)
	defer cancel()
	version, err := db.serverVersion(ctx)
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("store/etcd: no answer from etcd at %s within %v (is it running, and do the TLS settings match its own?): %w",
			strings.Join(opts.Endpoints, ","), opts.DialTimeout, err)
	}
	db.progressRequests = progressInOrder(version)
	db.log.Info("store on etcd", "endpoints", strings.Join(opts.Endpoints, ","), "prefix", opts.Prefix,
		"etcd_version", version, "progress_requests", db.progressRequests)
	if opts.CompactionInterval > 0 {
		db.loops.Add(1)
		go db.compactLoop()
	}
	return db, nil
}

// clientConfig is the etcd client's configuration for opts (defaults
// applied).
func clientConfig(opts Options) clientv3.Config {
	return clientv3.Config{
		Endpoints:            opts.Endpoints,
		TLS:                  opts.TLS,
		DialTimeout:          opts.DialTimeout,
		DialKeepAliveTime:    opts.KeepAliveTime,
		DialKeepAliveTimeout: opts.KeepAliveTimeout,
		MaxCallSendMsgSize:   maxSend,
		Logger:               zap.NewNop(),
	}
}

// serverVersion returns the version of the first endpoint that answers.
func (db *DB) serverVersion(ctx context.Context) (string, error) {
	var errs []error
	for _, ep := range db.cli.Endpoints() {
		st, err := db.cli.Status(ctx, ep)
		if err == nil {
			return st.Version, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	return "", errors.Join(errs...)
}

// progressInOrder reports whether an etcd of version v answers progress
// requests only once every event before the revision it reports is sent:
// 3.4.25, 3.5.8 and later (etcd issue 15220).
func progressInOrder(v string) bool {
	var major, minor, patch int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return false
	}
	switch {
	case major != 3:
		return major > 3
	case minor == 4:
		return patch >= 25
	case minor == 5:
		return patch >= 8
	}
	return minor > 5
}

// Close stops the store's watchers and loops and closes the client. It is
// idempotent.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	close(db.closing)
	db.stopReqs()
	// Wait for the operations inside enter (cut short by stopReqs): none
	// starts a watcher after this.
	db.closeMu.Lock()
	db.closeMu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
	db.watchers.Wait()
	db.loops.Wait()
	if err := db.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("store/etcd: close: %w", err)
	}
	return nil
}

// enter starts an operation: it fails once the store is closed. The caller
// calls leave when done.
func (db *DB) enter() error {
	db.closeMu.RLock()
	if db.closed.Load() {
		db.closeMu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (db *DB) leave() { db.closeMu.RUnlock() }

// deadlineMargin is the share of a caller's remaining time that a request
// to etcd leaves unused (at most maxDeadlineMargin), so that the caller gets
// the store's error while it can still answer with it: an API request whose
// deadline is also its connection's write deadline answers 503 "store
// unavailable" rather than having its stream cut.
const (
	deadlineMargin    = 10 // percent
	maxDeadlineMargin = time.Second
)

// reqCtx bounds a request: a context with a deadline ends a margin before
// it, one without after RequestTimeout. It also ends the request when the
// store closes, so that Close does not wait for requests to an etcd that
// does not answer.
func (db *DB) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok {
		margin := min(time.Until(d)*deadlineMargin/100, maxDeadlineMargin)
		ctx, cancel = context.WithDeadline(ctx, d.Add(-max(margin, 0)))
	} else {
		ctx, cancel = context.WithTimeout(ctx, db.opts.RequestTimeout)
	}
	stop := context.AfterFunc(db.closeCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// etcdKey is the etcd key of a store key.
func (db *DB) etcdKey(key string) (string, error) {
	if !strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("store/etcd: key %q does not begin with a slash", key)
	}
	return db.prefix + key, nil
}

// span is the etcd range of the store keys under prefix. ok is false when no
// key can be under prefix (it neither is empty nor begins with a slash).
func (db *DB) span(prefix string) (start, end string, ok bool) {
	switch {
	case prefix == "":
		start = db.prefix + "/"
	case strings.HasPrefix(prefix, "/"):
		start = db.prefix + prefix
	default:
		return "", "", false
	}
	return start, clientv3.GetPrefixRangeEnd(start), true
}

// storeKey strips the prefix from an etcd key.
func (db *DB) storeKey(k []byte) string { return string(k[len(db.prefix):]) }

// Create stores value under key unless key holds a document.
func (db *DB) Create(ctx context.Context, key string, value []byte) (int64, error) {
	k, err := db.etcdKey(key)
	if err != nil {
		return 0, err
	}
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.leave()
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	resp, err := db.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(value))).
		Commit()
	if err != nil {
		return 0, db.mapErr(fmt.Sprintf("create %q (%d bytes)", key, len(value)), err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("store/etcd: create %q: %w", key, store.ErrAlreadyExists)
	}
	return resp.Header.Revision, nil
}

// Get returns the document under key, at opts.Revision when set.
func (db *DB) Get(ctx context.Context, key string, opts store.GetOptions) (*store.KeyValue, error) {
	k, err := db.etcdKey(key)
	if err != nil {
		return nil, err
	}
	if opts.Revision < 0 {
		return nil, fmt.Errorf("store/etcd: negative revision %d", opts.Revision)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	resp, err := db.cli.Get(ctx, k, clientv3.WithRev(opts.Revision))
	if err != nil {
		return nil, db.mapErr(fmt.Sprintf("get %q at %d", key, opts.Revision), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("store/etcd: get %q: %w", key, store.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return &store.KeyValue{Key: key, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}, nil
}

// Update replaces the document under key, comparing its ModRevision with
// expectedRevision when that is not 0.
func (db *DB) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	k, err := db.etcdKey(key)
	if err != nil {
		return 0, err
	}
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.leave()
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	cmp := clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
	if expectedRevision != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(k), "=", expectedRevision)
	}
	resp, err := db.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpPut(k, string(value))).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, db.mapErr(fmt.Sprintf("update %q (%d bytes)", key, len(value)), err)
	}
	if !resp.Succeeded {
		return 0, db.casFailed("update", key, expectedRevision, resp)
	}
	return resp.Header.Revision, nil
}

// casFailed is the error of a compare-and-swap whose Else branch read the
// key: not found when it is missing, a conflict otherwise.
func (db *DB) casFailed(op, key string, expected int64, resp *clientv3.TxnResponse) error {
	if len(resp.Responses) == 0 || len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
		return fmt.Errorf("store/etcd: %s %q: %w", op, key, store.ErrNotFound)
	}
	got := resp.Responses[0].GetResponseRange().GetKvs()[0].ModRevision
	return fmt.Errorf("store/etcd: %s %q at revision %d, expected %d: %w", op, key, got, expected, store.ErrConflict)
}

// Delete removes the document under key and returns it as it was.
func (db *DB) Delete(ctx context.Context, key string, expectedRevision int64) (*store.KeyValue, int64, error) {
	k, err := db.etcdKey(key)
	if err != nil {
		return nil, 0, err
	}
	if err := db.enter(); err != nil {
		return nil, 0, err
	}
	defer db.leave()
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	cmp := clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
	if expectedRevision != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(k), "=", expectedRevision)
	}
	resp, err := db.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return nil, 0, db.mapErr(fmt.Sprintf("delete %q", key), err)
	}
	if !resp.Succeeded {
		return nil, 0, db.casFailed("delete", key, expectedRevision, resp)
	}
	prev := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return nil, 0, fmt.Errorf("store/etcd: delete %q: %w", key, store.ErrNotFound)
	}
	kv := prev[0]
	return &store.KeyValue{Key: key, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision},
		resp.Header.Revision, nil
}

// CurrentRevision returns etcd's current revision.
func (db *DB) CurrentRevision(ctx context.Context) (int64, error) {
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.leave()
	return db.currentRevision(ctx)
}

// currentRevision needs the caller inside enter.
func (db *DB) currentRevision(ctx context.Context) (int64, error) {
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	resp, err := db.cli.Get(ctx, db.prefix+"/", clientv3.WithCountOnly())
	if err != nil {
		return 0, db.mapErr("current revision", err)
	}
	return resp.Header.Revision, nil
}
