package store_test

import (
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

func TestCompactSampler(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	type obs struct {
		at   time.Time
		rev  int64
		want int64
	}
	tests := []struct {
		name    string
		window  time.Duration
		minRevs int64
		obs     []obs
	}{
		{"nothing old enough", 5 * time.Minute, 10, []obs{{min(0), 100, 0}, {min(4), 200, 0}}},
		{"time keeps more", 5 * time.Minute, 10, []obs{{min(0), 100, 0}, {min(3), 150, 0}, {min(6), 300, 100}, {min(9), 400, 150}}},
		{"count keeps more", 5 * time.Minute, 10, []obs{{min(0), 100, 0}, {min(6), 105, 95}}},
		{"newest old sample", time.Minute, 0, []obs{{min(0), 10, 0}, {min(1), 20, 10}, {min(2), 30, 20}, {min(10), 40, 30}}},
		{"idle store", time.Minute, 0, []obs{{min(0), 10, 0}, {min(5), 10, 10}, {min(9), 10, 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s store.CompactSampler
			for i, o := range tt.obs {
				if got := s.Observe(o.at, o.rev, tt.window, tt.minRevs); got != o.want {
					t.Errorf("observation %d (rev %d): target %d, want %d", i, o.rev, got, o.want)
				}
			}
		})
	}
}
