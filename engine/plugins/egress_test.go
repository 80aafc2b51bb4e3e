package plugins

import (
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// TestEgressConfig checks spec.egress's validation, which names each bad
// entry by its field path, and its conversion to the host's grant.
func TestEgressConfig(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	tests := []struct {
		name        string
		spec        EgressSpec
		callTimeout time.Duration
		want        *EgressConfig
		errs        []string
	}{
		{name: "grants", spec: EgressSpec{Allow: []EgressAllow{
			{URL: "https://api.example.com", Methods: []string{"get", "PUT", "GET"}},
			{URL: "http://127.0.0.1:9000", Methods: []string{"POST"}},
		}, Timeout: "2s", MaxResponseBytes: 4096, Concurrency: 2, RatePerSecond: 5, Burst: 10, CABundle: certPEM},
			want: &EgressConfig{Allow: []abi.EgressRule{
				{Scheme: "https", Host: "api.example.com", Methods: []string{"GET", "PUT"}},
				{Scheme: "http", Host: "127.0.0.1", Port: 9000, Methods: []string{"POST"}},
			}, Timeout: 2 * time.Second, MaxResponseBytes: 4096, Concurrency: 2, RatePerSecond: 5, Burst: 10, CABundle: []byte(certPEM)}},
		{name: "timeout capped at the call deadline", spec: EgressSpec{Timeout: "10s"}, callTimeout: time.Second,
			want: &EgressConfig{Timeout: time.Second}},
		{name: "bad entries named", spec: EgressSpec{Allow: []EgressAllow{
			{URL: "https://ok.example.com", Methods: []string{"GET"}},
			{URL: "ftp://files.example.com", Methods: []string{"GET"}},
			{URL: "https://x.example.com"},
			{URL: "https://y.example.com", Methods: []string{"GET", "*"}},
		}, Timeout: "soon", MaxResponseBytes: -1, Concurrency: 1000, RatePerSecond: -1, Burst: -2, CABundle: "not pem"},
			errs: []string{
				`spec.egress.allow[1].url: Invalid value: "ftp://files.example.com"`,
				`spec.egress.allow[2].methods: Required value`,
				`spec.egress.allow[3].methods[1]: Unsupported value: "*"`,
				`spec.egress.timeout: Invalid value: "soon"`,
				`spec.egress.maxResponseBytes: Invalid value: -1`,
				`spec.egress.concurrency: Invalid value: 1000`,
				`spec.egress.ratePerSecond: Invalid value: -1`,
				`spec.egress.burst: Invalid value: -2`,
				`spec.egress.caBundle: Invalid value: "(PEM)": holds no PEM certificate`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := tt.spec.config(tt.callTimeout)
			if len(tt.errs) > 0 {
				msg := errs.ToAggregate()
				if len(errs) != len(tt.errs) {
					t.Errorf("got %d errors, want %d: %v", len(errs), len(tt.errs), msg)
				}
				for _, want := range tt.errs {
					if msg == nil || !strings.Contains(msg.Error(), want) {
						t.Errorf("errors %v do not contain %q", msg, want)
					}
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("config: %v", errs.ToAggregate())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}
