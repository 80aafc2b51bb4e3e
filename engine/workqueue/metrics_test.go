package workqueue

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func histogram(t *testing.T, reg *prometheus.Registry, name, queue string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == queue {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no %s for %s", name, queue)
	return nil
}

func TestPrometheusMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p, err := NewPrometheusProvider(reg)
		if err != nil {
			t.Fatal(err)
		}
		q := New(Options[string]{Name: "widgets", Metrics: p, MetricsUpdatePeriod: time.Second})
		other := New(Options[string]{Name: "gadgets", Metrics: p})
		defer q.ShutDown()
		defer other.ShutDown()
		value := func(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

		q.Add("a")
		q.Add("a")
		q.Add("b")
		other.Add("x")
		if v := value(p.adds.WithLabelValues("widgets")); v != 2 {
			t.Errorf("adds = %v, want 2 (duplicates not counted)", v)
		}
		if v := value(p.depth.WithLabelValues("widgets")); v != 2 {
			t.Errorf("depth = %v, want 2", v)
		}
		if v := value(p.depth.WithLabelValues("gadgets")); v != 1 {
			t.Errorf("gadgets depth = %v, want 1", v)
		}

		time.Sleep(3 * time.Second)
		k, _ := q.Get()
		if v := value(p.depth.WithLabelValues("widgets")); v != 1 {
			t.Errorf("depth after Get = %v, want 1", v)
		}
		if h := histogram(t, reg, "setpoint_workqueue_queue_duration_seconds", "widgets"); h.GetSampleCount() != 1 || h.GetSampleSum() != 3 {
			t.Errorf("queue latency count %d sum %v, want 1 and 3", h.GetSampleCount(), h.GetSampleSum())
		}

		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if v := value(p.longestRunning.WithLabelValues("widgets")); v != 2 {
			t.Errorf("longest running = %v, want 2 (last refresh at 2s)", v)
		}
		if v := value(p.unfinishedWork.WithLabelValues("widgets")); v != 2 {
			t.Errorf("unfinished work = %v, want 2", v)
		}
		q.Done(k)
		if v := value(p.longestRunning.WithLabelValues("widgets")); v != 0 {
			t.Errorf("longest running = %v with nothing held, want 0", v)
		}
		if h := histogram(t, reg, "setpoint_workqueue_work_duration_seconds", "widgets"); h.GetSampleCount() != 1 || h.GetSampleSum() != 2.5 {
			t.Errorf("work duration count %d sum %v, want 1 and 2.5", h.GetSampleCount(), h.GetSampleSum())
		}

		q.AddRateLimited("c")
		q.AddRateLimited("c")
		if v := value(p.retries.WithLabelValues("widgets")); v != 2 {
			t.Errorf("retries = %v, want 2", v)
		}

		if _, err := NewPrometheusProvider(reg); err == nil {
			t.Error("registering twice with one registry: no error")
		}
		p.Delete("gadgets")
		if n := testutil.CollectAndCount(p.depth); n != 1 {
			t.Errorf("depth series after Delete = %d, want 1", n)
		}
	})
}

func TestMetricsProviderFuncWithNilFields(t *testing.T) {
	adds := 0
	q := New(Options[string]{Metrics: MetricsProviderFunc(func(string) Metrics {
		return Metrics{Adds: counterFunc(func() { adds++ })}
	})})
	q.Add("a")
	k, _ := q.Get()
	q.Done(k)
	q.AddRateLimited("a")
	q.ShutDown()
	if adds != 1 {
		t.Fatalf("adds = %d, want 1", adds)
	}
}

type counterFunc func()

func (f counterFunc) Inc() { f() }
