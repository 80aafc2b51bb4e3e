package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store"
)

// ErrPrefixNotEmpty: a restore was refused because the prefix holds keys.
var ErrPrefixNotEmpty = errors.New("store/etcd: the prefix holds keys")

// Restore limits: etcd refuses a transaction of more than --max-txn-ops
// (default 128) compares or operations, or a request over
// --max-request-bytes (default 1.5 MiB).
const (
	restoreBatchOps   = 64
	restoreBatchBytes = 1 << 20
	bumpWorkers       = 16
)

// RestoreOptions are Restore's parameters besides the store's Options.
type RestoreOptions struct {
	// Revision is the snapshot's revision.
	Revision int64
	// ExtraRevisions is added to Revision to give the revision that etcd
	// must have passed before the first document is written (see Restore).
	ExtraRevisions int64
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Keys int64
	// Bumped is the number of revisions etcd was advanced by before the
	// documents were written.
	Bumped int64
	// First and Last are the revisions of the first and last document
	// written; the history before Last is compacted.
	First, Last int64
}

// Restore writes the documents next returns (io.EOF after the last), a
// snapshot taken at ro.Revision, under opts.Prefix of an etcd that holds
// no key there (ErrPrefixNotEmpty otherwise).
//
// etcd assigns its own revisions, one per transaction, and cannot be told
// to write at a given one: the documents keep their content but get new
// revisions, so their resourceVersions change, and each document's
// create and mod revision are the one of the transaction that wrote it.
// So that no resourceVersion a client of the source still holds is taken
// for one of the restored store, Restore first advances etcd's revision
// past ro.Revision+ro.ExtraRevisions (by writing, then deleting, a marker
// key beside the prefix, one revision per write: etcd has no other way),
// writes the documents, then compacts etcd's history up to the last
// document's revision. A read, list or watch from any older
// resourceVersion then gets store.ErrCompacted (410 Gone at the API), and
// clients relist, as after compaction. A source whose clients hold
// resourceVersions past the snapshot's (writes made after it) needs
// ExtraRevisions of at least that many writes. etcd's history is global:
// the compaction is seen by every prefix of the same etcd, as any
// compaction is.
func Restore(ctx context.Context, opts Options, ro RestoreOptions, next func() (*store.KeyValue, error)) (RestoreResult, error) {
	var res RestoreResult
	if ro.Revision < 1 || ro.ExtraRevisions < 0 {
		return res, fmt.Errorf("store/etcd: restore at revision %d (+%d)", ro.Revision, ro.ExtraRevisions)
	}
	opts.CompactionInterval = -1 // no background compaction in a restore
	db, err := Open(opts)
	if err != nil {
		return res, err
	}
	defer db.Close()
	start, end, _ := db.span("")
	resp, err := db.cli.Get(ctx, start, clientv3.WithRange(end), clientv3.WithCountOnly())
	if err != nil {
		return res, db.mapErr("restore: count keys", err)
	}
	if resp.Count > 0 {
		return res, fmt.Errorf("%w: restore into %s refused: it holds %d keys; restore needs an empty prefix", ErrPrefixNotEmpty, db.prefix, resp.Count)
	}
	if res.Bumped, err = db.bumpRevision(ctx, resp.Header.Revision, ro.Revision+ro.ExtraRevisions); err != nil {
		return res, err
	}

	var batch []*store.KeyValue
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		cmps := make([]clientv3.Cmp, len(batch))
		ops := make([]clientv3.Op, len(batch))
		for i, kv := range batch {
			k := db.prefix + kv.Key
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
			ops[i] = clientv3.OpPut(k, string(kv.Value))
		}
		tr, err := db.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return db.mapErr(fmt.Sprintf("restore %d keys from %q", len(batch), batch[0].Key), err)
		}
		if !tr.Succeeded {
			return fmt.Errorf("%w: a key from %q on was written during the restore", ErrPrefixNotEmpty, batch[0].Key)
		}
		if res.First == 0 {
			res.First = tr.Header.Revision
		}
		res.Last = tr.Header.Revision
		res.Keys += int64(len(batch))
		batch, size = batch[:0], 0
		return nil
	}
	for {
		kv, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		if _, err := db.etcdKey(kv.Key); err != nil {
			return res, err
		}
		if len(batch) >= restoreBatchOps || len(batch) > 0 && size+len(kv.Value) > restoreBatchBytes {
			if err := flush(); err != nil {
				return res, err
			}
		}
		batch = append(batch, kv)
		size += len(kv.Key) + len(kv.Value)
	}
	if err := flush(); err != nil {
		return res, err
	}
	if res.Last == 0 {
		return res, nil
	}
	if err := db.compact(ctx, res.Last); err != nil && !errors.Is(err, store.ErrCompacted) {
		return res, fmt.Errorf("store/etcd: restore: compact at %d: %w", res.Last, err)
	}
	return res, nil
}

// bumpRevision advances etcd's revision from cur past target with writes
// of a marker key beside the prefix (outside every store key: keys begin
// with a slash), then deletes it.
func (db *DB) bumpRevision(ctx context.Context, cur, target int64) (int64, error) {
	n := target - cur
	if n <= 0 {
		return 0, nil
	}
	marker := db.prefix + ".restore"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	var ferr error
	for range bumpWorkers {
		wg.Go(func() {
			for range work {
				if _, err := db.cli.Put(ctx, marker, ""); err != nil {
					once.Do(func() { ferr = db.mapErr("restore: advance the revision", err); cancel() })
					return
				}
			}
		})
	}
feed:
	for range n {
		select {
		case work <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if ferr != nil {
		return 0, ferr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if _, err := db.cli.Delete(ctx, marker); err != nil {
		return 0, db.mapErr("restore: delete the revision marker", err)
	}
	return n + 1, nil
}
