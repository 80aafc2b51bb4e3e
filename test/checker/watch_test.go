package checker

import (
	"strings"
	"testing"
)

func TestCheckWatch(t *testing.T) {
	known := []Write{{"a", "v1", 11}, {"b", "v2", 12}, {"a", "v3", 14}}
	attempted := map[string]bool{"v1": true, "v2": true, "v3": true, "v4": true}
	good := []Segment{
		{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}}},
		{StartRV: 12, Events: []WatchEvent{{Bookmark, "", 13, ""}, {Modified, "a", 14, "v3"}, {Modified, "b", 15, "v4"}, {Deleted, "b", 16, ""}}},
	}
	tests := []struct {
		name string
		segs []Segment
		want string // "" for no violation
	}{
		{"good", good, ""},
		{"relist after gone", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}}, Gone: true},
			{StartRV: 12, Events: []WatchEvent{{Modified, "a", 14, "v3"}}},
		}, ""},
		{"reorder", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "b", 12, "v2"}, {Added, "a", 11, "v1"}}},
		}, "reordered"},
		{"duplicate", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "a", 11, "v1"}}},
		}, "duplicate"},
		{"dropped event", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Modified, "a", 14, "v3"}}},
		}, "gap"},
		{"relist by choice", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}}, Relist: true},
			{StartRV: 12, Events: []WatchEvent{{Modified, "a", 14, "v3"}}},
		}, ""},
		{"resume skips ahead", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}}},
			{StartRV: 12, Events: []WatchEvent{{Modified, "a", 14, "v3"}}},
		}, "resumed at 12"},
		{"resume replays", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}}},
			{StartRV: 12, Events: []WatchEvent{{Added, "b", 12, "v2"}}},
		}, "duplicate"},
		{"bookmark backwards", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}, {Bookmark, "", 11, ""}}},
		}, "bookmark 11 behind"},
		{"bookmark passes an undelivered event", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Bookmark, "", 12, ""}, {Added, "b", 12, "v2"}}},
		}, "the bookmark passed an event not yet delivered"},
		{"bookmark skips an event", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Bookmark, "", 12, ""}, {Modified, "a", 14, "v3"}}},
		}, "gap"},
		{"bookmark backwards across a resume", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}, {Bookmark, "", 13, ""}}},
			{StartRV: 13, Events: []WatchEvent{{Bookmark, "", 12, ""}}},
		}, "bookmark 12 behind revision 13"},
		{"stale content", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v0"}}},
		}, "the write there was"},
		{"invented object", []Segment{
			{StartRV: 10, Events: []WatchEvent{{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}, {Added, "c", 13, "zz"}}},
		}, "no client wrote"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckWatch(tt.segs, known, attempted)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("good watch flagged: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a violation containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckPerObjectOrder(t *testing.T) {
	ok := []WatchEvent{{Added, "a", 3, ""}, {Modified, "a", 3, ""}, {Modified, "a", 5, ""}, {Deleted, "a", 6, ""}, {Added, "a", 7, ""}}
	if err := CheckPerObjectOrder(ok); err != nil {
		t.Fatalf("good informer events flagged: %v", err)
	}
	bad := []WatchEvent{{Added, "a", 3, ""}, {Modified, "a", 5, ""}, {Modified, "a", 4, ""}}
	if err := CheckPerObjectOrder(bad); err == nil {
		t.Fatal("an update going back passed")
	}
}
