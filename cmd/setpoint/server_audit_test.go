package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

func TestAuditFlagsValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	log := filepath.Join(dir, "audit.log")
	tests := []struct {
		name    string
		flags   auditFlags
		wantErr []string // all in the error; none for success
	}{
		{name: "off", flags: auditFlags{}},
		{name: "on", flags: auditFlags{policyFile: good, path: log}},
		{name: "missing policy file", flags: auditFlags{policyFile: missing, path: log}, wantErr: []string{"--audit-policy-file", missing, "no such file"}},
		{name: "invalid policy", flags: auditFlags{policyFile: bad, path: log}, wantErr: []string{"--audit-policy-file", bad, "Loud"}},
		{name: "path without policy", flags: auditFlags{path: log}, wantErr: []string{"--audit-log-path needs --audit-policy-file"}},
		{name: "policy without path", flags: auditFlags{policyFile: good}, wantErr: []string{"needs --audit-log-path"}},
		{name: "negative maxsize", flags: auditFlags{policyFile: good, path: log, maxSize: -1}, wantErr: []string{"--audit-log-maxsize -1"}},
		{name: "negative maxbackup", flags: auditFlags{maxBackups: -1}, wantErr: []string{"--audit-log-maxbackup -1"}},
		{name: "negative maxage", flags: auditFlags{maxAge: -2}, wantErr: []string{"--audit-log-maxage -2"}},
		{name: "no buffer", flags: auditFlags{bufferSize: -1}, wantErr: []string{"--audit-log-batch-buffer-size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.flags
			if f.bufferSize == 0 {
				f.bufferSize = 10
			}
			err := f.validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				if (f.policy != nil) != (f.policyFile != "") {
					t.Errorf("policy read: %v", f.policy)
				}
				return
			}
			if err == nil {
				t.Fatal("validate accepted the flags")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestAuditLogOpen checks that the log file is created (mode 0600) at
// start, that an unwritable path stops the server, and that "-" is stdout.
func TestAuditLogOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	a := &auditFlags{path: path}
	w, err := a.open(nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file: %v %v", fi, err)
	}
	if _, err := w.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "line\n" {
		t.Errorf("log holds %q", b)
	}
	if _, err := (&auditFlags{path: filepath.Join(dir, "no", "such", "dir", "audit.log")}).open(nil); err == nil || !strings.Contains(err.Error(), "--audit-log-path") {
		t.Errorf("unwritable path: %v", err)
	}
	var out bytes.Buffer
	w, err = (&auditFlags{path: "-"}).open(&out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("x"))
	if out.String() != "x" {
		t.Errorf("stdout got %q", out.String())
	}
}

// stalledLog is an audit log output whose writes block until release is
// closed, as on a disk that stopped answering; entered gets a value when a
// write starts.
type stalledLog struct {
	entered, release chan struct{}
}

func (w *stalledLog) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}

// countedLog counts the lines written to it.
type countedLog struct{ lines atomic.Int32 }

func (w *countedLog) Write(p []byte) (int, error) {
	w.lines.Add(int32(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

// TestCloseAuditorBounded: an audit log that closes is closed with every
// event written; one whose write does not return is given up after the
// timeout, with a log line that counts the events not written and names
// none of them.
func TestCloseAuditorBounded(t *testing.T) {
	p, err := policy.LoadPolicyFromBytes([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// record audits three in-process writes: six events (RequestReceived
	// and ResponseComplete each).
	record := func(a *serving.Auditor) {
		attrs := authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: "alice"}, Verb: "update", Namespace: "default",
			APIVersion: "v1", Resource: "secrets", Name: "db-password", ResourceRequest: true,
		}
		for range 3 {
			a.AuditWrite(context.Background(), attrs, nil)(nil, nil)
		}
	}

	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	counted := &countedLog{}
	a, err := serving.NewAuditor(serving.AuditOptions{Policy: p, Out: counted, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	record(a)
	closeAuditor(a, time.Minute, log)
	if n := counted.lines.Load(); n != 6 || a.Pending() != 0 {
		t.Fatalf("after a close: %d events written, %d pending; want 6, 0", n, a.Pending())
	}
	if buf.Len() != 0 {
		t.Fatalf("a clean close logged:\n%s", buf.String())
	}

	stalled := &stalledLog{entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(stalled.release)
	a, err = serving.NewAuditor(serving.AuditOptions{Policy: p, Out: stalled, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	record(a)
	<-stalled.entered
	start := time.Now()
	closeAuditor(a, 50*time.Millisecond, log)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("closeAuditor waited %v for a stalled audit log, want about 50ms", took)
	}
	out := buf.String()
	if !strings.Contains(out, "audit log did not close in time") || !strings.Contains(out, "not_written=6") {
		t.Fatalf("a stalled audit log's close does not say how many events were lost:\n%s", out)
	}
	for _, secret := range []string{"alice", "db-password", "secrets"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log names an event's content %q:\n%s", secret, out)
		}
	}
}
