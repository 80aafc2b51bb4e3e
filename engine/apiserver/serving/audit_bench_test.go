package serving

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/audit/policy"
)

// BenchmarkAudit measures what the audit layer adds to a request through
// every serving layer: off, at Metadata, and at RequestResponse (a create
// with its body and response), events written to io.Discard.
func BenchmarkAudit(b *testing.B) {
	for _, bc := range []struct{ name, level string }{{"off", ""}, {"Metadata", "Metadata"}, {"RequestResponse", "RequestResponse"}} {
		b.Run(bc.name, func(b *testing.B) {
			var a *Auditor
			if bc.level != "" {
				p, err := policy.LoadPolicyFromBytes([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: " + bc.level + "\n"))
				if err != nil {
					b.Fatal(err)
				}
				a, err = NewAuditor(AuditOptions{Policy: p, Out: io.Discard, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
			}
			h := NewHandler(HandlerOptions{API: http.HandlerFunc(auditAPI), Token: testToken, Audit: a,
				Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))})
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/apis/example.setpoint.dev/v1/namespaces/ns1/widgets", strings.NewReader(widgetBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+testToken)
				rec := recorder{httptest.NewRecorder()}
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("create: %d", rec.Code)
				}
			}
		})
	}
}
