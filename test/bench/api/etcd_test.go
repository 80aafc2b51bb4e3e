package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// etcdBin is Debian's etcd-server, which `make deps` installs.
const etcdBin = "/usr/bin/etcd"

// etcdServer is a single-member etcd the benchmark runs as its baseline, on
// loopback ports with a data directory of its own.
type etcdServer struct {
	cmd      *exec.Cmd
	done     chan struct{}
	logs     bytes.Buffer
	endpoint string
	client   *clientv3.Client
}

// startEtcd starts etcd and registers its stop (SIGTERM, then SIGKILL) and
// the removal of its data directory with b.Cleanup, so they happen however
// the benchmark ends. Pdeathsig kills etcd if this process dies first.
func startEtcd(b *testing.B) *etcdServer {
	b.Helper()
	bin := etcdBin
	if v := os.Getenv("ETCD_BIN"); v != "" {
		bin = v
	}
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("etcd: %v (make deps installs Debian's etcd-server)", err)
	}
	dir := b.TempDir()
	clientAddr, err := testserver.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	peerAddr, err := testserver.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	e := &etcdServer{endpoint: "http://" + clientAddr, done: make(chan struct{})}
	e.cmd = exec.Command(bin,
		"--name", "bench",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://"+clientAddr,
		"--advertise-client-urls", "http://"+clientAddr,
		"--listen-peer-urls", "http://"+peerAddr,
		"--initial-advertise-peer-urls", "http://"+peerAddr,
		"--initial-cluster", "bench=http://"+peerAddr,
		"--initial-cluster-state", "new",
		"--quota-backend-bytes", fmt.Sprint(int64(4)<<30),
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	)
	e.cmd.Stdout, e.cmd.Stderr = &e.logs, &e.logs
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		b.Fatalf("start etcd: %v", err)
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	b.Cleanup(func() {
		if e.client != nil {
			_ = e.client.Close()
		}
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			_ = e.cmd.Process.Kill()
			<-e.done
		}
		if b.Failed() {
			b.Logf("etcd output:\n%s", e.logs.String())
		}
	})

	e.client, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{e.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		b.Fatalf("etcd client: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := e.client.Put(ctx, "/ready", "1")
		cancel()
		if err == nil {
			return e
		}
		select {
		case <-e.done:
			b.Fatalf("etcd exited: %v\n%s", e.cmd.ProcessState, e.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("etcd not ready within 30s: %v\n%s", err, e.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *etcdServer) pid() int { return e.cmd.Process.Pid }

// put writes n values of valueSize bytes under prefix, c at a time.
func (e *etcdServer) put(c, n int, prefix string, value string, timeout time.Duration) phase {
	return run(c, n, timeout, func(ctx context.Context, i int) error {
		_, err := e.client.Put(ctx, fmt.Sprintf("%s%07d", prefix, i), value)
		return err
	})
}

// get reads n single keys picked from the objects written under prefix.
func (e *etcdServer) get(c, n, objects int, prefix string, timeout time.Duration) phase {
	return run(c, n, timeout, func(ctx context.Context, i int) error {
		r, err := e.client.Get(ctx, fmt.Sprintf("%s%07d", prefix, pick(i, objects)))
		if err == nil && len(r.Kvs) != 1 {
			err = errors.New("key not found")
		}
		return err
	})
}

// list reads every key under prefix in one range, or in pages of limit
// (when limit > 0), and returns how many it read.
func (e *etcdServer) list(ctx context.Context, prefix string, limit int) (int, error) {
	if limit == 0 {
		r, err := e.client.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return 0, err
		}
		return len(r.Kvs), nil
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	key, n := prefix, 0
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(limit))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev)) // one consistent view, as the API's continue
		}
		r, err := e.client.Get(ctx, key, opts...)
		if err != nil {
			return n, err
		}
		rev = r.Header.Revision
		n += len(r.Kvs)
		if !r.More || len(r.Kvs) == 0 {
			return n, nil
		}
		key = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// pick spreads reads over the objects with a fixed stride, so that reads
// touch every object without a random source.
func pick(i, objects int) int { return (i * 7919) % objects }
