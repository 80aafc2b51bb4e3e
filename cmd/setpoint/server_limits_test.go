package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestServerLimitFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "no limits", args: []string{"--max-requests-inflight", "-1", "--max-mutating-requests-inflight", "-1", "--max-watches", "-1"}},
		{name: "below -1", args: []string{"--max-watches", "-2"}, wantErr: "--max-watches -2: want a positive number, or -1 for no limit"},
		{name: "negative timeout", args: []string{"--request-timeout", "-1s"}, wantErr: "--request-timeout -1s: want a positive duration"},
		{name: "queuing off", args: []string{"--max-queued-requests-per-user", "-1", "--max-queued-requests", "-1"}},
		{name: "queue bounds", args: []string{"--max-queued-requests-per-user", "5", "--max-queued-requests", "100", "--queue-wait-timeout", "2s"}},
		{name: "queue per user below -1", args: []string{"--max-queued-requests-per-user", "-3"}, wantErr: "--max-queued-requests-per-user -3: want a positive number, or -1 to turn queuing off"},
		{name: "queue total below -1", args: []string{"--max-queued-requests", "-2"}, wantErr: "--max-queued-requests -2: want a positive number, or -1 for no limit"},
		{name: "fair share off", args: []string{"--fair-share-seats", "-1"}},
		{name: "fair share seats", args: []string{"--fair-share-seats", "32"}},
		{name: "fair share below -1", args: []string{"--fair-share-seats", "-2"}, wantErr: "--fair-share-seats -2: want a positive number, or -1 to turn the fair share off"},
		{name: "negative queue wait", args: []string{"--queue-wait-timeout", "-1s"}, wantErr: "--queue-wait-timeout -1s: want a positive duration"},
		{name: "TLS 1.3", args: []string{"--tls-min-version", "VersionTLS13"}},
		{name: "unknown TLS version", args: []string{"--tls-min-version", "TLS1.3"}, wantErr: `--tls-min-version "TLS1.3": want one of`},
		{name: "one suite", args: []string{"--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}},
		{name: "unknown suite", args: []string{"--tls-cipher-suites", "TLS_RSA_WITH_NOTHING"}, wantErr: "--tls-cipher-suites: Cipher suite TLS_RSA_WITH_NOTHING not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got limitFlags
			cmd := newServerCommand()
			cmd.RunE = func(c *cobra.Command, _ []string) error {
				// Read the parsed flags back into fresh options.
				f := c.Flags()
				got.maxRequestsInflight, _ = f.GetInt("max-requests-inflight")
				got.maxMutatingRequestsInflight, _ = f.GetInt("max-mutating-requests-inflight")
				got.maxWatches, _ = f.GetInt("max-watches")
				got.maxQueuedPerUser, _ = f.GetInt("max-queued-requests-per-user")
				got.maxQueued, _ = f.GetInt("max-queued-requests")
				got.queueWaitTimeout, _ = f.GetDuration("queue-wait-timeout")
				got.fairShareSeats, _ = f.GetInt("fair-share-seats")
				got.requestTimeout, _ = f.GetDuration("request-timeout")
				got.tlsMinVersion, _ = f.GetString("tls-min-version")
				got.tlsCipherSuites, _ = f.GetStringSlice("tls-cipher-suites")
				return got.validate()
			}
			cmd.SetArgs(append([]string{"--data-dir", t.TempDir()}, tc.args...))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
