package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/audit/policy"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// BenchmarkSystemWriteAudit measures what auditing the server's own writes
// adds to a controller's status write of a 1 KiB Widget (dry run: the
// write pipeline's CPU, without the disk). off is the baseline, with no
// audit log; api has a log recording everything, and a write that is not
// the server's own (an API request's, audited by the API instead);
// dropped is a write of the garbage collector under a policy that drops
// the server's identities; Metadata and RequestResponse record it, to
// io.Discard.
func BenchmarkSystemWriteAudit(b *testing.B) {
	dropSystem := "- level: None\n  userGroups: [\"" + engine.SystemGroup + "\"]\n- level: Metadata\n"
	for _, bc := range []struct {
		name, rules string
		system      bool
	}{
		{"off", "", true},
		{"api", "- level: RequestResponse\n", false},
		{"dropped", dropSystem, true},
		{"Metadata", "- level: Metadata\n", true},
		{"RequestResponse", "- level: RequestResponse\n", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var wa engine.WriteAuditor
			if bc.rules != "" {
				p, err := policy.LoadPolicyFromBytes([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n" + bc.rules))
				if err != nil {
					b.Fatal(err)
				}
				a, err := serving.NewAuditor(serving.AuditOptions{Policy: p, Out: io.Discard, BufferSize: 1 << 16,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				wa = a
			}
			svc, obj := benchWidget(b, wa)
			ctx := context.Background()
			if bc.system {
				ctx = engine.WithSystemUser(ctx, engine.SystemUser("system:setpoint:garbage-collector"))
			}
			widgets := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
			dry := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				obj.Object["status"] = map[string]any{"state": "ready", "observedGeneration": int64(i)}
				if _, err := svc.UpdateStatus(ctx, widgets, obj, dry); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchWidget returns a Service on a Badger store in a temp dir, auditing
// its system writes with a, and a stored 1 KiB Widget.
func benchWidget(b *testing.B, a engine.WriteAuditor) (*engine.Service, *unstructured.Unstructured) {
	ctx := context.Background()
	db, err := badger.Open(b.TempDir(), badger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	svc, err := engine.New(ctx, engine.Options{Store: db, Auditor: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	if _, err := svc.Create(ctx, kinds.CRDResource, kindstest.WidgetCRD(b), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	w := kindstest.Widget("w", "small", map[string]string{"app": "bench"})
	w.SetAnnotations(map[string]string{"bench.setpoint.dev/pad": strings.Repeat("x", 850)})
	gvr := schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "widgets"}
	out, err := svc.Create(ctx, gvr, w, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return svc, out
}
