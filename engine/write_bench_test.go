package engine

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BenchmarkCreate measures the engine's part of a Widget create (with an
// admitter installed that changes nothing, as setpoint server has) and of a
// LIST of 1,000 Widgets, as objects and as JSON.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		if _, err := s.Create(ctx, widgets, widget(fmt.Sprintf("w%d", i), "small", nil), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateDryRun is BenchmarkCreate without the store write: the
// CPU of the create pipeline (defaulting, pruning, admission, validation).
func BenchmarkCreateDryRun(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		if _, err := s.Create(ctx, widgets, widget(fmt.Sprintf("w%d", i), "small", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateDryRun1KiB is BenchmarkCreateDryRun with test/bench/api's
// 1 KiB objects.
func BenchmarkCreateDryRun1KiB(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		if _, err := s.Create(ctx, widgets, paddedWidget(fmt.Sprintf("w%d", i)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	for i := range 1000 {
		if _, err := s.Create(ctx, widgets, widget(fmt.Sprintf("w%d", i), "small", nil), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("objects", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			l, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := s.ListJSON(ctx, widgets, "default", metav1.ListOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// paddedWidget is a Widget of about 1 KiB, padded with an annotation as
// test/bench/api pads its objects.
func paddedWidget(name string) *unstructured.Unstructured {
	u := widget(name, "small", map[string]string{"app": "bench"})
	u.SetAnnotations(map[string]string{"bench.setpoint.dev/pad": strings.Repeat("x", 850)})
	return u
}

// BenchmarkCreate1KiB is BenchmarkCreate with test/bench/api's 1 KiB
// objects, written to the store, with the JSON the API answers with.
func BenchmarkCreate1KiB(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		if _, body, err := s.CreateJSON(ctx, widgets, paddedWidget(fmt.Sprintf("w%d", i)), metav1.CreateOptions{}); err != nil || body == nil {
			b.Fatal(err, body == nil)
		}
	}
}

// reportCPU reports the CPU time (user and system) the process spent per
// operation between its call and the call of the function it returns: on a
// shared machine a steadier figure than ns/op.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		b.ReportMetric(float64((processCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEncode measures encoding a 1 KiB Widget to its stored form.
func BenchmarkEncode(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	obj, err := s.Create(ctx, widgets, paddedWidget("w"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		b.Fatal(err)
	}
	sv, _ := s.reg.Get(widgets)
	b.ReportAllocs()
	defer reportCPU(b)()
	for range b.N {
		if _, err := sv.Encode(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// statusOf is a Widget status as the example's operator writes it; i
// varies it so that each update writes.
func statusOf(i int) map[string]any {
	state := "Ready"
	if i%2 == 1 {
		state = "Provisioning"
	}
	return map[string]any{
		"state":              state,
		"capacity":           int64(1),
		"provision":          "w-provision",
		"observedGeneration": int64(1),
		"lastProvisioned":    "2026-11-21T07:00:00Z",
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Provisioned", "message": fmt.Sprintf("round %d", i),
			"observedGeneration": int64(1), "lastTransitionTime": "2026-11-21T07:00:00Z",
		}},
	}
}

// storedWidget returns a service without admission holding a created 1 KiB
// Widget, with statusOf(0) set through the status subresource when
// withStatus, and that Widget as stored.
func storedWidget(b *testing.B, withStatus bool) (*Service, *unstructured.Unstructured) {
	ctx := context.Background()
	s := newService(b)
	s.setAdmitter(AdmitterFuncs{})
	obj, err := s.Create(ctx, widgets, paddedWidget("w"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if withStatus {
		obj.Object["status"] = statusOf(0)
		if obj, err = s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return s, obj
}

// BenchmarkUpdateStatus1KiB measures a status write of a 1 KiB Widget
// (with an admitter installed that changes nothing, as setpoint server
// has), as the controller makes it: the object last returned, with a new
// status.
func BenchmarkUpdateStatus1KiB(b *testing.B) {
	ctx := context.Background()
	s, obj := storedWidget(b, false)
	var err error
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		obj.Object["status"] = statusOf(i)
		if obj, err = s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate1KiB measures an update of a 1 KiB Widget that changes a
// label (the spec and status stay).
func BenchmarkUpdate1KiB(b *testing.B) {
	ctx := context.Background()
	s, obj := storedWidget(b, true)
	var err error
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		obj.SetLabels(map[string]string{"app": "bench", "round": fmt.Sprint(i % 2)})
		if obj, err = s.Update(ctx, widgets, obj, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateStatusDryRun1KiB is BenchmarkUpdateStatus1KiB without the
// store write: the CPU of the status update pipeline (the read and decode of
// the stored object, coercion, admission, validation).
func BenchmarkUpdateStatusDryRun1KiB(b *testing.B) {
	ctx := context.Background()
	s, obj := storedWidget(b, true)
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := range b.N {
		obj.Object["status"] = statusOf(i + 1)
		if _, err := s.UpdateStatus(ctx, widgets, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			b.Fatal(err)
		}
	}
}
