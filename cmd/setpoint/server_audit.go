package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"gopkg.in/natefinch/lumberjack.v2"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/plugins"
)

// The API's Auditor records the plugins' writes and the server's own
// (the garbage collector's, the plugin manager's) too.
var (
	_ plugins.Auditor     = (*serving.Auditor)(nil)
	_ engine.WriteAuditor = (*serving.Auditor)(nil)
)

// rbacUser is the identity the default roles and bindings, and the
// aggregated ClusterRoles, are written as: audited as
// "system:setpoint:rbac".
var rbacUser = engine.SystemUser("system:setpoint:rbac")

// auditFlags are `setpoint server`'s audit flags, kube-apiserver's
// --audit-* flags of its log backend (which writes JSON always, and
// buffers always: a request never waits for the log).
type auditFlags struct {
	policyFile string
	path       string
	maxSize    int
	maxBackups int
	maxAge     int
	compress   bool
	bufferSize int

	policy *auditinternal.Policy // read by validate
}

func (a *auditFlags) register(f *pflag.FlagSet) {
	f.StringVar(&a.policyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy (YAML or JSON) deciding which requests, plugin writes and the server's own (garbage collector, plugin manager) included, the audit log records and at which level; auditing is on when this and --audit-log-path are set")
	f.StringVar(&a.path, "audit-log-path", "", `file the audit events are written to, audit.k8s.io/v1 Event objects as JSON lines (created with mode 0600 if missing); "-" for standard output`)
	f.IntVar(&a.maxSize, "audit-log-maxsize", 0, "size in megabytes at which the audit log is rotated (renamed with a timestamp, and a new file started); 0 for 100")
	f.IntVar(&a.maxBackups, "audit-log-maxbackup", 0, "how many rotated audit logs are kept; 0 keeps them all (unless --audit-log-maxage removes them)")
	f.IntVar(&a.maxAge, "audit-log-maxage", 0, "how many days a rotated audit log is kept, by the timestamp in its name; 0 keeps them regardless of age")
	f.BoolVar(&a.compress, "audit-log-compress", false, "gzip rotated audit logs")
	f.IntVar(&a.bufferSize, "audit-log-batch-buffer-size", serving.DefaultAuditBufferSize, "how many audit events may wait to be written; past that, events are dropped (counted in setpoint_audit_events_dropped_total and logged) rather than slow requests down")
}

// validate checks the flags and reads the policy, so that a server with an
// unreadable or invalid policy refuses to start.
func (a *auditFlags) validate() error {
	for _, c := range []struct {
		name string
		v    int
	}{
		{"--audit-log-maxsize", a.maxSize},
		{"--audit-log-maxbackup", a.maxBackups},
		{"--audit-log-maxage", a.maxAge},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s %d: want 0 or more", c.name, c.v)
		}
	}
	if a.bufferSize < 0 {
		return fmt.Errorf("--audit-log-batch-buffer-size %d: want 1 or more (0 for the default)", a.bufferSize)
	}
	switch {
	case a.policyFile == "" && a.path == "":
		return nil
	case a.policyFile == "":
		return errors.New("--audit-log-path needs --audit-policy-file: the policy says what to record")
	case a.path == "":
		return fmt.Errorf("--audit-policy-file %s needs --audit-log-path: the log is where events go", a.policyFile)
	}
	p, err := policy.LoadPolicyFromFile(a.policyFile)
	if err != nil {
		return fmt.Errorf("--audit-policy-file %s: %w", a.policyFile, err)
	}
	a.policy = p
	return nil
}

// auditor opens the audit log and returns the Auditor writing to it, or nil
// when auditing is off. Close the Auditor once requests and plugins have
// stopped.
func (a *auditFlags) auditor(log *slog.Logger, reg prometheus.Registerer, stdout io.Writer) (*serving.Auditor, error) {
	if a.policy == nil {
		return nil, nil
	}
	out, err := a.open(stdout)
	if err != nil {
		return nil, err
	}
	au, err := serving.NewAuditor(serving.AuditOptions{
		Policy: a.policy, Out: out, BufferSize: a.bufferSize,
		Logger: log.With("component", "audit"), Registerer: reg,
	})
	if err != nil {
		if c, ok := out.(io.Closer); ok {
			_ = c.Close()
		}
		return nil, err
	}
	log.Info("auditing", "policy", a.policyFile, "path", a.path, "rules", len(a.policy.Rules))
	return au, nil
}

// open returns where events go: stdout, or the file, rotated. The file is
// created now, so that a path that cannot be written stops the server at
// start rather than losing events later.
func (a *auditFlags) open(stdout io.Writer) (io.Writer, error) {
	if a.path == "-" {
		return struct{ io.Writer }{stdout}, nil // never closed
	}
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit-log-path: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("--audit-log-path: %w", err)
	}
	return &lumberjack.Logger{
		Filename:   a.path,
		MaxSize:    a.maxSize,
		MaxBackups: a.maxBackups,
		MaxAge:     a.maxAge,
		Compress:   a.compress,
	}, nil
}

// auditLog is what closeAuditor needs of the audit log.
type auditLog interface {
	Close() error
	Pending() int
}

// closeAuditor closes the audit log, waiting at most timeout, the store's
// --store-close-timeout: closing writes the events still buffered and
// closes the file, and a write to a disk that stopped answering (or to a
// standard output nobody reads) does not return, which would hold a
// stopping server forever. Past the timeout it logs how many events were
// not written (a count: the events themselves stay unlogged) and returns;
// the process exits without them.
func closeAuditor(au auditLog, timeout time.Duration, log *slog.Logger) {
	if closed, err := closeWithin(au, timeout); closed {
		if err != nil {
			log.Error("close audit log", "err", err)
		}
		return
	}
	log.Error("audit log did not close in time; exiting with audit events not written (a write to the audit log has not returned: a stalled disk, or a standard output nobody reads)",
		"waited", timeout, "not_written", au.Pending())
}
