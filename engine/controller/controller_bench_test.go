package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// BenchmarkConvergeNative measures how fast b.N widgets, already stored,
// reach Ready through a native Go reconciler that provisions one child each,
// on the real object service and Badger: list, reconcile, child create,
// status write and event per object. It reports objects per second.
func BenchmarkConvergeNative(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := newEngine(b)
			ctx := context.Background()
			for i := range b.N {
				if _, err := s.Create(ctx, widgets, newWidget(fmt.Sprintf("w%d", i), "small"), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			list, err := s.List(ctx, widgets, "default", metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			w, err := s.Watch(ctx, widgets, "default", metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			ctl, err := controller.New(controller.Options{
				Name: "bench", Client: s, For: widgetKind, Owns: []controller.Kind{gizmoKind},
				Reconciler: &gizmoPlugin{state: "ok"}, Workers: workers, Logger: quietLogger(),
			})
			if err != nil {
				b.Fatal(err)
			}
			m := controller.NewManager(controller.ManagerOptions{Logger: quietLogger()})
			m.Put(ctl)
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			go func() { done <- m.Run(runCtx) }()
			readyCount := 0
			seen := make(map[string]bool, b.N)
			timeout := time.After(5 * time.Minute)
			for readyCount < b.N {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						b.Fatal("watch ended")
					}
					if ev.Type != watch.Modified {
						continue
					}
					u := ev.Object.(*unstructured.Unstructured)
					if s, _, _ := ready(u); s == "True" && !seen[u.GetName()] {
						seen[u.GetName()] = true
						readyCount++
					}
				case <-timeout:
					b.Fatalf("%d of %d Ready after 5 minutes", readyCount, b.N)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "objects/s")
		})
	}
}
