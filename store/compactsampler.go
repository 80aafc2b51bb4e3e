package store

import "time"

// CompactSampler finds the revision a store had one retention window ago,
// the revision a background compaction may go to. A backend calls Observe
// at each compaction tick; the zero value is ready to use.
type CompactSampler struct{ samples []revSample }

type revSample struct {
	at  time.Time
	rev int64
}

// Observe records rev at now and returns the revision compaction may go to:
// the newest sample at least window old, capped at rev-minRevs; 0 for none.
func (s *CompactSampler) Observe(now time.Time, rev int64, window time.Duration, minRevs int64) int64 {
	s.samples = append(s.samples, revSample{now, rev})
	cut := now.Add(-window)
	old := -1
	for i, x := range s.samples {
		if !x.at.After(cut) {
			old = i
		}
	}
	if old < 0 {
		return 0
	}
	target := s.samples[old].rev
	s.samples = s.samples[old:] // keep the newest old sample for the next round
	return max(0, min(target, rev-minRevs))
}
