package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/setpoint-dev/setpoint/store/etcd"
)

// runSnapshotRestoreEtcd restores file into an empty prefix of an etcd.
func runSnapshotRestoreEtcd(ctx context.Context, o *snapshotRestoreOptions, file string, stdout io.Writer) error {
	e := o.etcd
	switch {
	case o.dataDir != "":
		return usageError("--data-dir is for --store badger; --store etcd restores into --etcd-prefix")
	case len(e.servers) == 0:
		return usageError("snapshot restore --store etcd needs --etcd-servers (such as http://127.0.0.1:2379)")
	case (e.certFile == "") != (e.keyFile == ""):
		return usageError("--etcd-certfile and --etcd-keyfile go together")
	case !strings.HasPrefix(e.prefix, "/"):
		return usageError("--etcd-prefix %q: want a path beginning with a slash, such as /setpoint", e.prefix)
	case o.extraRevs < 0:
		return usageError("--bump-revision %d: want 0 or more", o.extraRevs)
	}
	snap, err := openVerifiedSnapshot(file)
	if err != nil {
		return err
	}
	defer snap.Close()
	hdr := snap.Header()
	opts := etcd.Options{Endpoints: e.servers, Prefix: e.prefix}
	if e.caFile != "" || e.certFile != "" {
		tlsInfo := transport.TLSInfo{TrustedCAFile: e.caFile, CertFile: e.certFile, KeyFile: e.keyFile}
		cfg, err := tlsInfo.ClientConfig()
		if err != nil {
			return fmt.Errorf("etcd TLS (--etcd-cafile, --etcd-certfile, --etcd-keyfile): %w", err)
		}
		opts.TLS = cfg
	}
	res, err := etcd.Restore(ctx, opts, etcd.RestoreOptions{Revision: hdr.Revision, ExtraRevisions: o.extraRevs}, snap.Next)
	if err != nil {
		if errors.Is(err, etcd.ErrPrefixNotEmpty) {
			return usageError("%v", err)
		}
		if res.Keys > 0 {
			return fmt.Errorf("restore %s into %s under %s: %w (%d keys were written: delete the prefix before trying again)",
				file, strings.Join(e.servers, ","), e.prefix, err, res.Keys)
		}
		return fmt.Errorf("restore %s into %s under %s: %w", file, strings.Join(e.servers, ","), e.prefix, err)
	}
	fmt.Fprintf(stdout, "Restored %s (sha256 %s): snapshot revision %d, %d keys, into etcd %s under %s at revisions %d to %d (etcd advanced by %d revisions; history compacted at %d, so older resourceVersions get 410)\n  setpoint server --store etcd --etcd-servers %s --etcd-prefix %s\n",
		file, snap.sum, hdr.Revision, res.Keys, strings.Join(e.servers, ","), e.prefix, res.First, res.Last, res.Bumped, res.Last,
		strings.Join(e.servers, ","), e.prefix)
	return nil
}
