package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
