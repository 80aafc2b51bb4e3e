package main

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestEventAge(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ts := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339) }
	for _, tc := range []struct {
		name  string
		event map[string]any
		want  string
	}{
		{name: "once", event: map[string]any{"firstTimestamp": ts(5 * time.Minute), "lastTimestamp": ts(5 * time.Minute), "count": int64(1)},
			want: "5m"},
		{name: "repeated", event: map[string]any{"firstTimestamp": ts(10 * time.Minute), "lastTimestamp": ts(2 * time.Minute), "count": int64(9)},
			want: "2m (x9 over 10m)"},
		{name: "series", event: map[string]any{"eventTime": now.Add(-time.Hour).Format(time.RFC3339Nano),
			"series": map[string]any{"count": int64(3), "lastObservedTime": now.Add(-30 * time.Second).Format(time.RFC3339Nano)}},
			want: "30s (x3 over 60m)"},
		{name: "event time only", event: map[string]any{"eventTime": now.Add(-90 * time.Second).Format(time.RFC3339Nano)},
			want: "90s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventAge(unstructured.Unstructured{Object: tc.event}, now); got != tc.want {
				t.Errorf("eventAge = %q, want %q", got, tc.want)
			}
		})
	}
}
