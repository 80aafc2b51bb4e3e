package snapshot

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// SecretNames are the private records (store.PrivateKey) that hold security
// material: the CA, the serving key, the admin token, signing keys. Keys
// equal to store.PrivateKey(name) or under store.PrivateKey(name+"/") are
// left out of a snapshot unless SaveOptions.Secrets is set; every other key,
// private or not (uploaded modules, read-schema records), is always in it.
var SecretNames = []string{"security", "secrets", "pki", "ca", "tls", "keys", "tokens", "token", "identity"}

// IsSecret reports whether key holds security material.
func IsSecret(key string) bool {
	rest, ok := strings.CutPrefix(key, store.PrivatePrefix)
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	for _, n := range SecretNames {
		if first == n {
			return true
		}
	}
	return false
}

// SaveOptions tune Save.
type SaveOptions struct {
	// Secrets includes the keys IsSecret reports.
	Secrets bool
	// PageSize is how many keys one List page reads. Default: 256.
	PageSize int64
	// Now stamps the header. Default: time.Now.
	Now func() time.Time
	// Started, when set, is called with the header once the counts are
	// known and before the first byte is written: the last point at which
	// an error can still be reported other than by cutting the stream.
	Started func(Header) error
}

// Save writes a snapshot of st to w: every key at one revision, the
// current one when Save starts. It reads the store twice at that revision
// through List's Revision and Continue, first the keys only to count them
// (the header comes first), then the documents; writes that go on meanwhile
// are at later revisions and are not seen. It fails with store.ErrCompacted
// if compaction passes the revision before it is done.
func Save(ctx context.Context, st store.Store, w io.Writer, opts SaveOptions) (Header, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var filter func(string, []byte) bool
	if !opts.Secrets {
		filter = func(key string, _ []byte) bool { return !IsSecret(key) }
	}
	hdr := Header{Counts: map[string]int64{}, Secrets: opts.Secrets}
	// Count at the current revision, which the first page fixes.
	lo := store.ListOptions{Limit: opts.PageSize, KeysOnly: true, Filter: filter}
	var err error
	hdr.Revision, err = store.ListPages(ctx, st, "/", lo, func(items []store.KeyValue) error {
		for _, kv := range items {
			hdr.Keys++
			hdr.Counts[Resource(kv.Key)]++
		}
		return nil
	})
	if err != nil {
		return hdr, fmt.Errorf("snapshot: count keys: %w", err)
	}
	hdr.Time = opts.Now().UTC()
	if opts.Started != nil {
		if err := opts.Started(hdr); err != nil {
			return hdr, err
		}
	}
	sw, err := NewWriter(w, hdr)
	if err != nil {
		return hdr, err
	}
	// The documents at that revision; ListPages checks every page is read
	// there. What fails in the writer is returned as it is, what fails in
	// the store with the revision.
	lo = store.ListOptions{Revision: hdr.Revision, Limit: opts.PageSize, Filter: filter}
	var n int64
	var werr error
	_, err = store.ListPages(ctx, st, "/", lo, func(items []store.KeyValue) error {
		for i := range items {
			if n++; n > hdr.Keys {
				werr = fmt.Errorf("snapshot: more keys at revision %d than counted (%d)", hdr.Revision, hdr.Keys)
			} else {
				werr = sw.Write(&items[i])
			}
			if werr != nil {
				return werr
			}
		}
		return nil
	})
	if werr != nil {
		return hdr, werr
	}
	if err != nil {
		return hdr, fmt.Errorf("snapshot: read keys at revision %d: %w", hdr.Revision, err)
	}
	if err := sw.Close(); err != nil {
		return hdr, err
	}
	return hdr, nil
}
