package controller

import "testing"

func TestOwnWrites(t *testing.T) {
	k := Key{"default", "w"}
	tests := []struct {
		name      string
		wrote     []string
		cached    string
		wantStale bool
		wantLen   int // after the stale check
	}{
		{"nothing written", nil, "5", false, 0},
		{"cache behind", []string{"7"}, "5", true, 1},
		{"cache caught up", []string{"7"}, "7", false, 0},
		{"cache ahead", []string{"7"}, "9", false, 0},
		{"older write kept out", []string{"7", "6"}, "6", true, 1},
		{"numeric, not lexical", []string{"10"}, "9", true, 1},
		{"opaque, different", []string{"x"}, "y", true, 1},
		{"opaque, same", []string{"x"}, "x", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newOwnWrites()
			for _, rv := range tt.wrote {
				w.wrote(k, rv)
			}
			if got := w.stale(k, tt.cached); got != tt.wantStale {
				t.Errorf("stale = %v, want %v", got, tt.wantStale)
			}
			if got := w.len(); got != tt.wantLen {
				t.Errorf("len = %d, want %d", got, tt.wantLen)
			}
			w.forget(k)
			if w.len() != 0 {
				t.Error("forget kept the key")
			}
		})
	}
}
