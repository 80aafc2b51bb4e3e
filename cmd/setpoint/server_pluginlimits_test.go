package main

import (
	"strings"
	"testing"
)

func TestPluginLimitFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o pluginLimitOptions)
	}{
		{name: "defaults", check: func(t *testing.T, o pluginLimitOptions) {
			if w := o.writeLimits(); w.Rate != 100 || w.Burst != 1000 || w.MaxChildren != 1000 {
				t.Errorf("write limits %+v", w)
			}
			if l := o.logOptions(); l.Rate != 100 || l.Burst != 200 || l.MaxLines != 1000 || l.MaxBytes != 1<<20 {
				t.Errorf("log options %+v", l)
			}
		}},
		{name: "set", args: []string{"--plugin-write-rate", "2.5", "--plugin-write-burst", "7", "--plugin-max-children", "3", "--plugin-log-lines", "10"},
			check: func(t *testing.T, o pluginLimitOptions) {
				if w := o.writeLimits(); w.Rate != 2.5 || w.Burst != 7 || w.MaxChildren != 3 || o.logOptions().MaxLines != 10 {
					t.Errorf("write limits %+v, log lines %d", w, o.logOptions().MaxLines)
				}
			}},
		{name: "negative rate", args: []string{"--plugin-write-rate", "-1"}, wantErr: "--plugin-write-rate: want a positive number"},
		{name: "negative log bytes", args: []string{"--plugin-log-bytes", "-5"}, wantErr: "--plugin-log-bytes: want a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newServerCommand()
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var o pluginLimitOptions
			f := cmd.Flags()
			o.writeRate, _ = f.GetFloat64("plugin-write-rate")
			o.writeBurst, _ = f.GetInt("plugin-write-burst")
			o.maxChildren, _ = f.GetInt("plugin-max-children")
			o.logRate, _ = f.GetFloat64("plugin-log-rate")
			o.logBurst, _ = f.GetInt("plugin-log-burst")
			o.logLines, _ = f.GetInt("plugin-log-lines")
			o.logBytes, _ = f.GetInt("plugin-log-bytes")
			err := o.validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}
