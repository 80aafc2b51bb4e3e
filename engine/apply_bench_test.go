package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appliedPaddedWidget is paddedWidget(name) as an applied configuration.
func appliedPaddedWidget(b *testing.B, name string) []byte {
	j, err := json.Marshal(paddedWidget(name).Object)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkApplyDryRun1KiB is BenchmarkCreateDryRun1KiB through
// server-side apply: what an object that is applied costs to create.
func BenchmarkApplyDryRun1KiB(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	opts := metav1.PatchOptions{FieldManager: "bench", DryRun: []string{metav1.DryRunAll}}
	data := make([][]byte, 64)
	for i := range data {
		data[i] = appliedPaddedWidget(b, fmt.Sprintf("w%d", i))
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		if _, _, err := s.Apply(ctx, widgets, "default", fmt.Sprintf("w%d", i%64), data[i%64], opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateStatusDryRun1KiBApplied is BenchmarkUpdateStatusDryRun1KiB
// on an object that was applied, whose writes are all tracked in
// managedFields.
func BenchmarkUpdateStatusDryRun1KiBApplied(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	obj, _, err := s.Apply(ctx, widgets, "default", "w", appliedPaddedWidget(b, "w"), metav1.PatchOptions{FieldManager: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	obj.Object["status"] = statusOf(0)
	if obj, err = s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "controller"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		obj.Object["status"] = statusOf(i + 1)
		if _, err := s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{FieldManager: "controller", DryRun: []string{metav1.DryRunAll}}); err != nil {
			b.Fatal(err)
		}
	}
}
