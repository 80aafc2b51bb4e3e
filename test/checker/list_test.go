package checker

import (
	"strings"
	"testing"
)

func TestCheckList(t *testing.T) {
	// a written at 11 and 14, b at 12 and deleted at 16 (seen by the
	// watch only), c written at 13 by an operation whose outcome the
	// client never learnt (seen by the watch only).
	known := []Write{{"a", "v1", 11}, {"b", "v2", 12}, {"a", "v3", 14}}
	attempted := map[string]bool{"v1": true, "v2": true, "v3": true, "v4": true, "v5": true}
	segs := []Segment{{StartRV: 10, Events: []WatchEvent{
		{Added, "a", 11, "v1"}, {Added, "b", 12, "v2"}, {Added, "c", 13, "v4"}, {Modified, "a", 14, "v3"}, {Bookmark, "", 15, ""}, {Deleted, "b", 16, ""},
	}}}
	tests := []struct {
		name string
		list List
		segs []Segment
		want string // "" for no violation
	}{
		{"at 12", List{RV: 12, Items: map[string]Listed{"a": {11, "v1"}, "b": {12, "v2"}}}, segs, ""},
		{"at 15", List{RV: 15, Items: map[string]Listed{"a": {14, "v3"}, "b": {12, "v2"}, "c": {13, "v4"}}}, segs, ""},
		{"at 16", List{RV: 16, Items: map[string]Listed{"a": {14, "v3"}, "c": {13, "v4"}}}, segs, ""},
		{"a later write nobody saw", List{RV: 20, Items: map[string]Listed{"a": {18, "v5"}, "c": {13, "v4"}}}, segs, ""},
		{"missing, not covered by a watch", List{RV: 20, Items: map[string]Listed{"c": {13, "v4"}}}, segs, ""},
		{"extra: newer than the list", List{RV: 12, Items: map[string]Listed{"a": {11, "v1"}, "b": {12, "v2"}, "c": {13, "v4"}}}, segs, "after the list's revision"},
		{"stale value", List{RV: 15, Items: map[string]Listed{"a": {11, "v1"}, "b": {12, "v2"}, "c": {13, "v4"}}}, segs, "older than its write at 14 (stale)"},
		{"wrong value", List{RV: 15, Items: map[string]Listed{"a": {14, "v1"}, "b": {12, "v2"}, "c": {13, "v4"}}}, segs, `the write there was "v3"`},
		{"deleted object listed", List{RV: 16, Items: map[string]Listed{"a": {14, "v3"}, "b": {12, "v2"}, "c": {13, "v4"}}}, segs, "deleted at 16"},
		{"missing object", List{RV: 15, Items: map[string]Listed{"a": {14, "v3"}, "b": {12, "v2"}}}, segs, "misses c, written at 13"},
		{"invented object", List{RV: 15, Items: map[string]Listed{"a": {14, "v3"}, "b": {12, "v2"}, "c": {13, "v4"}, "d": {9, "zz"}}}, segs, "which no client wrote"},
		{"object at another's revision", List{RV: 15, Items: map[string]Listed{"a": {14, "v3"}, "b": {13, "v4"}, "c": {13, "v4"}}}, segs, "shows a change of c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckList(tt.list, known, tt.segs, attempted)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("good list flagged: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a violation containing %q", err, tt.want)
			}
		})
	}
}
