package etcd

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpoint-dev/setpoint/store"
)

// listBatch is how many keys one etcd range read of a filtered or unlimited
// List returns, so that a List never holds more than that from etcd beyond
// what it keeps.
const listBatch = 500

// List returns the documents under prefix in key order, at one revision
// across pages.
func (db *DB) List(ctx context.Context, prefix string, opts store.ListOptions) (*store.ListResult, error) {
	if opts.Revision < 0 || opts.Limit < 0 {
		return nil, fmt.Errorf("store/etcd: negative revision %d or limit %d", opts.Revision, opts.Limit)
	}
	rev := opts.Revision
	var from string // store key to start at
	if opts.Continue != "" {
		var err error
		rev, from, err = store.DecodeContinue(opts.Continue, prefix)
		if err == nil && !strings.HasPrefix(from, "/") {
			// Every store key starts with "/": etcd's prefix is put before it.
			err = store.ErrInvalidContinue
		}
		if err != nil {
			return nil, fmt.Errorf("store/etcd: list %q: %w", prefix, err)
		}
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	ctx, cancel := db.reqCtx(ctx)
	defer cancel()
	start, end, ok := db.span(prefix)
	if !ok {
		// No key can be under prefix: an empty list at the current revision.
		cur, err := db.currentRevision(ctx)
		if err != nil {
			return nil, err
		}
		if rev > cur {
			return nil, fmt.Errorf("store/etcd: list at %d, current %d: %w", rev, cur, store.ErrFutureRevision)
		}
		if rev == 0 {
			rev = cur
		}
		return &store.ListResult{Revision: rev}, nil
	}
	if from != "" {
		start = db.prefix + from
	}
	res := &store.ListResult{Revision: rev}
	// Read up to one item past Limit to know whether a next page exists.
	batch := int64(listBatch)
	if opts.Filter == nil && opts.Limit > 0 {
		batch = opts.Limit + 1
	}
	for {
		ropts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithRev(res.Revision), clientv3.WithLimit(batch)}
		if opts.KeysOnly {
			ropts = append(ropts, clientv3.WithKeysOnly())
		}
		resp, err := db.cli.Get(ctx, start, ropts...)
		if err != nil {
			return nil, db.mapErr(fmt.Sprintf("list %q at %d", prefix, res.Revision), err)
		}
		if res.Revision == 0 {
			res.Revision = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			item := store.KeyValue{Key: db.storeKey(kv.Key), ModRevision: kv.ModRevision}
			if !opts.KeysOnly {
				item.Value, item.CreateRevision = kv.Value, kv.CreateRevision
			}
			if opts.Filter != nil && !opts.Filter(item.Key, item.Value) {
				continue
			}
			if opts.Limit > 0 && int64(len(res.Items)) == opts.Limit {
				// One more accepted item: the page is full and another follows.
				last := res.Items[len(res.Items)-1].Key
				res.Continue = store.EncodeContinue(res.Revision, last+"\x00")
				return res, nil
			}
			res.Items = append(res.Items, item)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
