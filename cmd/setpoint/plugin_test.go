package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitPermissions(t *testing.T) {
	tests := []struct {
		name              string
		read, write, perm []string
		wantRead          []string
		wantWrite         []string
		wantErr           bool
	}{
		{name: "none"},
		{name: "read and write", perm: []string{"read=widgets", "write=events", "READ=gadgets"},
			wantRead: []string{"widgets", "gadgets"}, wantWrite: []string{"events"}},
		{name: "added to --read and --write", read: []string{"a"}, write: []string{"b"}, perm: []string{"read=c", " write = d "},
			wantRead: []string{"a", "c"}, wantWrite: []string{"b", "d"}},
		{name: "star", perm: []string{"read=*"}, wantRead: []string{"*"}},
		{name: "no equals", perm: []string{"widgets"}, wantErr: true},
		{name: "empty resource", perm: []string{"read="}, wantErr: true},
		{name: "unknown verb", perm: []string{"delete=widgets"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &pluginOptions{read: tt.read, write: tt.write, permissions: tt.perm}
			err := o.splitPermissions()
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				if got := exitCode(err); got != exitUsage {
					t.Errorf("exit code %d, want %d (usage)", got, exitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.wantRead, o.read); d != "" {
				t.Errorf("read (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantWrite, o.write); d != "" {
				t.Errorf("write (-want +got):\n%s", d)
			}
		})
	}
}
