package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"google.golang.org/grpc/grpclog"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
	"github.com/setpoint-dev/setpoint/store/etcd"
)

// etcdFlags are `setpoint server`'s store choice and etcd flags.
type etcdFlags struct {
	kind     string
	servers  []string
	caFile   string
	certFile string
	keyFile  string
	prefix   string
}

// addEtcdFlags registers --store and the etcd flags.
func (o *serverOptions) addEtcdFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	e := &o.storeEtcd
	f.StringVar(&e.kind, "store", "badger", "where objects are kept: badger (embedded, in --data-dir) or etcd (an etcd cluster, --etcd-servers)")
	f.StringSliceVar(&e.servers, "etcd-servers", nil, "with --store etcd: the etcd client URLs (http://host:2379 or https://...), separated by commas")
	f.StringVar(&e.caFile, "etcd-cafile", "", "with --store etcd: PEM CA bundle that verifies the etcd servers' certificates")
	f.StringVar(&e.certFile, "etcd-certfile", "", "with --store etcd: PEM client certificate for etcd (needs --etcd-keyfile)")
	f.StringVar(&e.keyFile, "etcd-keyfile", "", "with --store etcd: PEM private key of --etcd-certfile")
	f.StringVar(&e.prefix, "etcd-prefix", etcd.DefaultPrefix, "with --store etcd: the key prefix of this installation, so that several installations share one etcd")
}

// openStore opens the store --store names and registers its metrics.
func (o *serverOptions) openStore(log *slog.Logger, reg prometheus.Registerer) (store.Store, error) {
	e := o.storeEtcd
	switch e.kind {
	case "badger":
		if len(e.servers) > 0 || e.caFile != "" || e.certFile != "" || e.keyFile != "" {
			return nil, errors.New("--etcd-servers, --etcd-cafile, --etcd-certfile and --etcd-keyfile need --store etcd")
		}
		reserve, err := o.storeFreeSpaceReserveBytes()
		if err != nil {
			return nil, err
		}
		st, err := badger.Open(filepath.Join(o.dataDir, "store"), badger.Options{
			Logger:                 log.With("component", "store"),
			CompactionWindow:       o.historyMinAge,
			CompactionMinRevisions: o.historyMinRevisions,
			CompactionInterval:     o.historyCompactionInterval,
			FreeSpaceReserve:       reserve,
		})
		if err != nil {
			return nil, fmt.Errorf("open the store in --data-dir %s: %w", o.dataDir, err)
		}
		registerStoreMetrics(reg, st)
		return st, nil
	case "etcd":
		return o.openEtcd(log)
	}
	return nil, fmt.Errorf("--store %q: want badger or etcd", e.kind)
}

// openEtcd opens the store on etcd.
func (o *serverOptions) openEtcd(log *slog.Logger) (*etcd.DB, error) {
	e := o.storeEtcd
	if len(e.servers) == 0 {
		return nil, errors.New("--store etcd needs --etcd-servers (such as http://127.0.0.1:2379)")
	}
	if (e.certFile == "") != (e.keyFile == "") {
		return nil, errors.New("--etcd-certfile and --etcd-keyfile go together")
	}
	if !strings.HasPrefix(e.prefix, "/") {
		return nil, fmt.Errorf("--etcd-prefix %q: want a path beginning with a slash, such as /setpoint", e.prefix)
	}
	opts := etcd.Options{
		Endpoints:              e.servers,
		Prefix:                 e.prefix,
		Logger:                 log.With("component", "store"),
		CompactionWindow:       o.historyMinAge,
		CompactionMinRevisions: o.historyMinRevisions,
		CompactionInterval:     o.historyCompactionInterval,
	}
	if e.caFile != "" || e.certFile != "" {
		tlsInfo := transport.TLSInfo{TrustedCAFile: e.caFile, CertFile: e.certFile, KeyFile: e.keyFile}
		cfg, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS (--etcd-cafile, --etcd-certfile, --etcd-keyfile): %w", err)
		}
		opts.TLS = cfg
	}
	grpcLogOnce.Do(func() { grpclog.SetLoggerV2(grpcLogger(log.With("component", "store"))) })
	st, err := etcd.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open the store on etcd (--etcd-servers %s): %w", strings.Join(e.servers, ","), err)
	}
	return st, nil
}

// grpcLogOnce: gRPC's logger is global and may be set only before gRPC
// runs.
var grpcLogOnce sync.Once

// grpcLogger sends the etcd client's gRPC log to log: its errors as
// warnings, its warnings (a connection attempt that failed, retried) at
// debug level, its info nowhere. The store's own errors say what failed.
func grpcLogger(log *slog.Logger) grpclog.LoggerV2 {
	return grpclog.NewLoggerV2(io.Discard, slogWriter{log, slog.LevelDebug}, slogWriter{log, slog.LevelWarn})
}

// slogWriter logs each write as one record at level.
type slogWriter struct {
	log   *slog.Logger
	level slog.Level
}

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Log(context.Background(), w.level, "etcd client", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}
