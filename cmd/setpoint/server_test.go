package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/endpoints/request"
)

func TestServerURL(t *testing.T) {
	for _, tt := range []struct{ listen, want string }{
		{"127.0.0.1:0", "https://127.0.0.1:"},
		{"[::1]:0", "https://[::1]:"},
		{"0.0.0.0:0", "https://127.0.0.1:"},
		{":0", "https://127.0.0.1:"},
		{"[::]:0", "https://[::1]:"},
		{"localhost:0", "https://localhost:"},
	} {
		ln, err := net.Listen("tcp", tt.listen)
		if err != nil {
			t.Skipf("listen %s: %v", tt.listen, err)
		}
		host, _, _ := net.SplitHostPort(tt.listen)
		got := serverURL(host, ln)
		ln.Close()
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("serverURL(%s) = %s, want %s...", tt.listen, got, tt.want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(&b, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"msg":"shown"`) {
		t.Errorf("log: %s", b.String())
	}
	if _, err := newLogger(&b, "loud", "text"); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := newLogger(&b, "info", "xml"); err == nil {
		t.Error("bad format accepted")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/data/admin.kubeconfig": "/data/admin.kubeconfig",
		"/my data/it's":          `'/my data/it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWatchStopperEndsOnlyWatches(t *testing.T) {
	ws := &watchStopper{}
	ws.ctx, ws.stop = context.WithCancel(context.Background())
	ended := make(chan string, 2)
	h := ws.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ended <- r.URL.Path
		case <-time.After(300 * time.Millisecond):
			ended <- "timeout " + r.URL.Path
		}
	}))
	serve := func(path, verb string) {
		r := httptest.NewRequest("GET", path, nil)
		r = r.WithContext(request.WithRequestInfo(r.Context(), &request.RequestInfo{Verb: verb}))
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	go serve("/watch", "watch")
	go serve("/list", "list")
	time.Sleep(50 * time.Millisecond)
	ws.stop()
	got := map[string]bool{<-ended: true, <-ended: true}
	if !got["/watch"] || !got["timeout /list"] {
		t.Errorf("ended: %v; want the watch cancelled and the list left alone", got)
	}
}

func TestServingHosts(t *testing.T) {
	if got := servingHosts("example.test"); len(got) != 1 || got[0] != "example.test" {
		t.Errorf("servingHosts(example.test) = %v", got)
	}
	if got := servingHosts("10.0.0.1"); len(got) != 1 || got[0] != "10.0.0.1" {
		t.Errorf("servingHosts(10.0.0.1) = %v", got)
	}
	for _, wildcard := range []string{"", "0.0.0.0", "::"} {
		got := servingHosts(wildcard)
		name, _ := os.Hostname()
		if name != "" && (len(got) == 0 || got[0] != name) {
			t.Errorf("servingHosts(%q) = %v, want the host name %s first", wildcard, got, name)
		}
	}
}

func TestServerFlagsValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		origins []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "repeated and comma-separated origins", args: []string{"--allowed-origins", "https://app.example.com,http://127.0.0.1:3000", "--allowed-origins", "https://ui.example.com:8443"},
			origins: []string{"https://app.example.com", "http://127.0.0.1:3000", "https://ui.example.com:8443"}},
		{name: "wildcard", args: []string{"--allowed-origins", "*"}, wantErr: `--allowed-origins "*": wildcards are refused`},
		{name: "wildcard host", args: []string{"--allowed-origins", "https://*.example.com"}, wantErr: "wildcards are refused"},
		{name: "no scheme", args: []string{"--allowed-origins", "app.example.com"}, wantErr: `--allowed-origins "app.example.com": want scheme://host[:port]`},
		{name: "path", args: []string{"--allowed-origins", "https://app.example.com/ui"}, wantErr: "want scheme://host[:port]"},
		{name: "other scheme", args: []string{"--allowed-origins", "ftp://app.example.com"}, wantErr: "want scheme://host[:port]"},
		{name: "empty entry", args: []string{"--allowed-origins", "https://app.example.com,,"}, wantErr: "want scheme://host[:port]"},
		{name: "tiny history", args: []string{"--history-min-revisions", "1", "--history-min-age", "1ms", "--history-compaction-interval", "10ms"}},
		{name: "no revisions", args: []string{"--history-min-revisions", "0"}, wantErr: "--history-min-revisions 0: want 1 or more"},
		{name: "zero age", args: []string{"--history-min-age", "0s"}, wantErr: "--history-min-age 0s: want a positive duration"},
		{name: "negative interval", args: []string{"--history-compaction-interval", "-1s"}, wantErr: "--history-compaction-interval -1s: want a positive duration"},
		{name: "short bookmark interval", args: []string{"--watch-bookmark-interval", "250ms"}},
		{name: "zero bookmark interval", args: []string{"--watch-bookmark-interval", "0s"}, wantErr: "--watch-bookmark-interval 0s: want a positive duration"},
		{name: "short plugin status interval", args: []string{"--plugin-status-interval", "250ms"}},
		{name: "zero plugin status interval", args: []string{"--plugin-status-interval", "0s"}, wantErr: "--plugin-status-interval 0s: want a positive duration"},
		{name: "short module gc grace", args: []string{"--module-gc-grace", "1s"}},
		{name: "zero module gc grace", args: []string{"--module-gc-grace", "0s"}, wantErr: "--module-gc-grace 0s: want a positive duration"},
		{name: "short leases", args: []string{"--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "300ms"}},
		{name: "renew deadline not under lease duration", args: []string{"--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s"},
			wantErr: "--leader-elect-renew-deadline 10s must be less than --leader-elect-lease-duration 10s"},
		{name: "retry period not under renew deadline", args: []string{"--leader-elect-retry-period", "10s"},
			wantErr: "--leader-elect-retry-period 10s must be less than --leader-elect-renew-deadline 10s"},
		{name: "zero lease duration", args: []string{"--leader-elect-lease-duration", "0s"}, wantErr: "--leader-elect-lease-duration 0s: want a positive duration"},
		{name: "zero store close timeout", args: []string{"--store-close-timeout", "0s"}, wantErr: "--store-close-timeout 0s: want a positive duration"},
		{name: "jwks uri", args: []string{"--service-account-issuer", "https://issuer.example.com", "--service-account-jwks-uri", "https://keys.example.com:8443/openid/v1/jwks"}},
		{name: "jwks uri with the default issuer", args: []string{"--service-account-jwks-uri", "https://keys.example.com/openid/v1/jwks"}},
		{name: "http jwks uri", args: []string{"--service-account-jwks-uri", "http://keys.example.com/openid/v1/jwks"},
			wantErr: `--service-account-jwks-uri "http://keys.example.com/openid/v1/jwks": want an https URL`},
		{name: "jwks uri without a host", args: []string{"--service-account-jwks-uri", "/openid/v1/jwks"}, wantErr: `--service-account-jwks-uri "/openid/v1/jwks": want an https URL with a host`},
		{name: "jwks uri with credentials", args: []string{"--service-account-jwks-uri", "https://user:secret@keys.example.com/jwks"},
			wantErr: `--service-account-jwks-uri "https://user:xxxxx@keys.example.com/jwks": want an https URL with a host and without fragment or credentials`},
		{name: "jwks uri for an http issuer", args: []string{"--service-account-issuer", "http://issuer.example.com", "--service-account-jwks-uri", "https://keys.example.com/jwks"},
			wantErr: `--service-account-jwks-uri is set, but issuer discovery is served only for an https --service-account-issuer; --service-account-issuer "http://issuer.example.com"`},
		{name: "http issuer without jwks uri", args: []string{"--service-account-issuer", "http://issuer.example.com"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o serverOptions
			cmd := newServerCommand()
			cmd.RunE = func(*cobra.Command, []string) error { return o.validate() }
			// Read the parsed flags back through the command's own options.
			cmd.PreRunE = func(c *cobra.Command, _ []string) error {
				o.allowedOrigins, _ = c.Flags().GetStringSlice("allowed-origins")
				o.historyMinRevisions, _ = c.Flags().GetInt64("history-min-revisions")
				o.historyMinAge, _ = c.Flags().GetDuration("history-min-age")
				o.historyCompactionInterval, _ = c.Flags().GetDuration("history-compaction-interval")
				o.pluginStatusInterval, _ = c.Flags().GetDuration("plugin-status-interval")
				o.watchBookmarkInterval, _ = c.Flags().GetDuration("watch-bookmark-interval")
				o.moduleGCGrace, _ = c.Flags().GetDuration("module-gc-grace")
				o.storeCloseTimeout, _ = c.Flags().GetDuration("store-close-timeout")
				o.leaderElect.leaseDuration, _ = c.Flags().GetDuration("leader-elect-lease-duration")
				o.leaderElect.renewDeadline, _ = c.Flags().GetDuration("leader-elect-renew-deadline")
				o.leaderElect.retryPeriod, _ = c.Flags().GetDuration("leader-elect-retry-period")
				o.serviceAccounts.issuer, _ = c.Flags().GetString("service-account-issuer")
				o.serviceAccounts.jwksURI, _ = c.Flags().GetString("service-account-jwks-uri")
				return nil
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
			if tc.origins != nil && strings.Join(o.allowedOrigins, " ") != strings.Join(tc.origins, " ") {
				t.Fatalf("origins %q, want %q", o.allowedOrigins, tc.origins)
			}
		})
	}
}

// TestServerLeaderElectDefault: leader election is on with etcd, where
// replicas share a store, and off with Badger, unless --leader-elect says.
func TestServerLeaderElectDefault(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--store", "etcd"}, true},
		{[]string{"--store", "etcd", "--leader-elect=false"}, false},
		{[]string{"--leader-elect"}, true},
	}
	for _, tc := range tests {
		var got bool
		cmd := newServerCommand()
		cmd.RunE = func(c *cobra.Command, _ []string) error {
			var o serverOptions
			o.storeEtcd.kind, _ = c.Flags().GetString("store")
			o.leaderElect.enabled, _ = c.Flags().GetBool("leader-elect")
			o.leaderElect.set = c.Flags().Changed("leader-elect")
			o.leaderElect.leaseDuration, o.leaderElect.renewDeadline, o.leaderElect.retryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
			err := o.resolveLeaderElect()
			got = o.leaderElect.enabled
			return err
		}
		cmd.SetArgs(append([]string{"--data-dir", t.TempDir()}, tc.args...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got != tc.want {
			t.Errorf("%q: leader election %t, want %t", tc.args, got, tc.want)
		}
	}
}
