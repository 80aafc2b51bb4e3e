package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/etcd"
	"github.com/setpoint-dev/setpoint/store/snapshot"
)

func init() { subcommands = append(subcommands, newSnapshotCommand) }

func newSnapshotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up a running server to a file, and restore a data directory from one",
		Long: `Back up and restore. save takes a consistent snapshot of a running server:
every stored key (objects, CRDs, Plugins, modules) as it was at one revision,
while writes go on. restore builds a new data directory from a snapshot, and
status verifies a snapshot and prints what it holds.

Security material (the CA, keys and admin token) is left out unless
--include-secrets is given; a server started on a restored data directory
without it makes new ones, and writes a new admin.kubeconfig.

` + exitCodeHelp,
		Args: noArgs,
	}
	cmd.AddCommand(newSnapshotSaveCommand(), newSnapshotRestoreCommand(), newSnapshotStatusCommand())
	return cmd
}

type snapshotSaveOptions struct {
	client  clientOptions
	secrets bool
}

func newSnapshotSaveCommand() *cobra.Command {
	o := &snapshotSaveOptions{}
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of a running server to FILE",
		Long: `Save every key the server stores, as it was at one revision, to FILE. Writes
go on meanwhile; they are at later revisions and not in the snapshot. The
file is written beside FILE, verified, then renamed over it, so FILE is
either the old content or a whole new snapshot.

` + exitCodeHelp,
		Example: `  setpoint snapshot save backup.snap
  setpoint snapshot status backup.snap`,
		Args: rangeArgs(1, 1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSnapshotSave(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().BoolVar(&o.secrets, "include-secrets", false, "include the security material the server stores (private keys, tokens); keep such a file as safe as the keys themselves")
	return cmd
}

func runSnapshotSave(ctx context.Context, o *snapshotSaveOptions, file string, stdout io.Writer) error {
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(c.config)
	// A snapshot takes as long as the store is large; --request-timeout
	// bounds ordinary requests.
	cfg.Timeout = 0
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("HTTP client: %w", err)
	}
	url := strings.TrimRight(cfg.Host, "/") + snapshotPath
	if o.secrets {
		url += "?secrets=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", cfg.UserAgent)
	resp, err := hc.Do(req)
	if err != nil {
		return c.explain(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var st metav1.Status
		if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
			return c.explain(&apierrors.StatusError{ErrStatus: st})
		}
		return fmt.Errorf("snapshot: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, resp.Body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("snapshot: receive: %w", err)
	}
	hdr, sum, err := verifySnapshotFile(tmp.Name())
	if err != nil {
		return fmt.Errorf("snapshot: the server's stream did not verify (was it cut?): %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Saved %s: revision %d, %d keys, sha256 %s\n", file, hdr.Revision, hdr.Keys, sum)
	return nil
}

func verifySnapshotFile(file string) (snapshot.Header, string, error) {
	f, err := os.Open(file)
	if err != nil {
		return snapshot.Header{}, "", err
	}
	defer f.Close()
	return snapshot.Verify(f)
}

// verifiedSnapshot is a snapshot file verified whole, open to read its
// records from the start: what a restore writes from.
type verifiedSnapshot struct {
	*snapshot.Reader
	f *os.File
	// sum is the file's checksum, as snapshot status prints it.
	sum string
}

// openVerifiedSnapshot verifies the whole of file before the caller writes
// anything from it, then opens it for reading its records; errors name the
// file. The caller closes it.
func openVerifiedSnapshot(file string) (*verifiedSnapshot, error) {
	_, sum, err := verifySnapshotFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &verifiedSnapshot{Reader: r, f: f, sum: sum}, nil
}

// Close closes the file.
func (v *verifiedSnapshot) Close() error { return v.f.Close() }

func newSnapshotStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status FILE",
		Short: "Verify a snapshot file and print its revision, counts and checksum",
		Long: `Read the whole snapshot FILE, check every record and its sha256 trailer, and
print its revision, when it was taken, the number of keys per resource and
the checksum. A damaged or truncated file fails with exit code 1.

` + exitCodeHelp,
		Args: rangeArgs(1, 1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			hdr, sum, err := verifySnapshotFile(args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "File:      %s\nRevision:  %d\nTaken:     %s\nKeys:      %d\nSecrets:   %t\nChecksum:  sha256:%s (verified)\nCounts:\n",
				args[0], hdr.Revision, hdr.Time.Format("2006-01-02T15:04:05Z"), hdr.Keys, hdr.Secrets, sum)
			for _, res := range hdr.SortedCounts() {
				fmt.Fprintf(w, "  %-40s %d\n", res, hdr.Counts[res])
			}
			return nil
		},
	}
}

type snapshotRestoreOptions struct {
	dataDir string
	// etcd: the store, its flags as setpoint server's, and the revisions
	// to advance etcd by past the snapshot's.
	etcd      etcdFlags
	extraRevs int64
}

func newSnapshotRestoreCommand() *cobra.Command {
	o := &snapshotRestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore FILE (--data-dir DIR | --store etcd --etcd-servers URLS --etcd-prefix PREFIX)",
		Short: "Build a new data directory, or fill an etcd prefix, from a snapshot",
		Long: `Verify the snapshot FILE, then build a new data directory DIR from it for
setpoint server --data-dir DIR. DIR must not exist or be empty. Every key
keeps its revisions (resourceVersions), and the store starts at the
snapshot's revision; its history before that is not restored, so a watch
or a continue token from an older resourceVersion gets 410 Gone and relists,
as after compaction.

With --store etcd, write the snapshot's keys under --etcd-prefix of the etcd
at --etcd-servers instead, for setpoint server --store etcd with the same
flags; the prefix must hold no key. etcd assigns its own revisions: every
object keeps its content but gets a new resourceVersion. So that no
resourceVersion a client of the source holds is taken for a restored one,
etcd's revision is first advanced past the snapshot's (one small write per
revision; --bump-revision N adds N more, for the writes the source made after
the snapshot), and etcd's history is compacted after the restore: a watch,
list or get from any older resourceVersion gets 410 Gone and relists. The
compaction is etcd's, seen by every prefix of that etcd.

` + exitCodeHelp,
		Example: `  setpoint snapshot restore backup.snap --data-dir ./restored
  setpoint server --data-dir ./restored

  setpoint snapshot restore backup.snap --store etcd --etcd-servers http://127.0.0.1:2379 --etcd-prefix /restored
  setpoint server --store etcd --etcd-servers http://127.0.0.1:2379 --etcd-prefix /restored`,
		Args: rangeArgs(1, 1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.etcd.kind == "etcd" {
				return runSnapshotRestoreEtcd(cmd.Context(), o, args[0], cmd.OutOrStdout())
			}
			if o.etcd.kind != "badger" {
				return usageError("--store %q: want badger or etcd", o.etcd.kind)
			}
			return runSnapshotRestore(o, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "", "the new data `DIR` (with --store badger, required; must not exist or be empty)")
	e := &o.etcd
	f.StringVar(&e.kind, "store", "badger", "what to restore into: badger (a new --data-dir) or etcd (an empty --etcd-prefix of --etcd-servers)")
	f.StringSliceVar(&e.servers, "etcd-servers", nil, "with --store etcd: the etcd client URLs, separated by commas")
	f.StringVar(&e.caFile, "etcd-cafile", "", "with --store etcd: PEM CA bundle that verifies the etcd servers' certificates")
	f.StringVar(&e.certFile, "etcd-certfile", "", "with --store etcd: PEM client certificate for etcd (needs --etcd-keyfile)")
	f.StringVar(&e.keyFile, "etcd-keyfile", "", "with --store etcd: PEM private key of --etcd-certfile")
	f.StringVar(&e.prefix, "etcd-prefix", etcd.DefaultPrefix, "with --store etcd: the key prefix to restore into; it must hold no key")
	f.Int64Var(&o.extraRevs, "bump-revision", 0, "with --store etcd: advance etcd's revision this much further past the snapshot's before writing, so that resourceVersions of writes the source made after the snapshot get 410 too")
	return cmd
}

func runSnapshotRestore(o *snapshotRestoreOptions, file string, stdout io.Writer) error {
	if o.dataDir == "" {
		return usageError("snapshot restore needs --data-dir DIR, the new data directory (or --store etcd)")
	}
	if len(o.etcd.servers) > 0 || o.extraRevs != 0 {
		return usageError("--etcd-servers and --bump-revision need --store etcd")
	}
	entries, err := os.ReadDir(o.dataDir)
	created := errors.Is(err, os.ErrNotExist)
	switch {
	case created:
	case err != nil:
		return err
	case len(entries) > 0:
		return usageError("%s is not empty: restore builds a new data directory; give one that does not exist or is empty", o.dataDir)
	}
	snap, err := openVerifiedSnapshot(file)
	if err != nil {
		return err
	}
	defer snap.Close()
	hdr := snap.Header()
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	storeDir := filepath.Join(o.dataDir, "store")
	if err := badger.Restore(storeDir, badger.Options{}, hdr.Revision, snap.Next); err != nil {
		// Leave nothing half-built behind.
		_ = os.RemoveAll(storeDir)
		if created {
			_ = os.Remove(o.dataDir)
		}
		return fmt.Errorf("restore %s into %s: %w", file, o.dataDir, err)
	}
	fmt.Fprintf(stdout, "Restored %s (sha256 %s): revision %d, %d keys, into %s\n  setpoint server --data-dir %s\n",
		file, snap.sum, hdr.Revision, hdr.Keys, o.dataDir, o.dataDir)
	return nil
}
