package engine

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCreate measures the engine's part of a Widget create (with an
// admitter installed that changes nothing, as setpoint server has) and of a
// LIST of 1,000 Widgets, as objects and as JSON.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	s := newService(b)
	s.SetAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
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
	s.SetAdmitter(AdmitterFuncs{})
	b.ReportAllocs()
	for i := range b.N {
		if _, err := s.Create(ctx, widgets, widget(fmt.Sprintf("w%d", i), "small", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
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
