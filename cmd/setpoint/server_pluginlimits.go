package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/setpoint-dev/setpoint/engine/plugins"
)

// pluginLimitOptions are the server's per-plugin limits on writes and logs;
// 0 stands for the plugins package's default.
type pluginLimitOptions struct {
	writeRate   float64
	writeBurst  int
	maxChildren int
	maxObjects  int
	logRate     float64
	logBurst    int
	logLines    int
	logBytes    int
}

func (o *pluginLimitOptions) addFlags(f *pflag.FlagSet) {
	f.Float64Var(&o.writeRate, "plugin-write-rate", plugins.DefaultWriteRate, "writes per second each plugin may make on average, host-call creates, updates and patches and the children of its reconciles together; the excess is answered 429 TooManyRequests")
	f.IntVar(&o.writeBurst, "plugin-write-burst", plugins.DefaultWriteBurst, "writes each plugin may make at once above --plugin-write-rate")
	f.IntVar(&o.maxChildren, "plugin-max-children", plugins.DefaultMaxChildren, "children one reconcile may ask for; more is a terminal error of the plugin's")
	f.IntVar(&o.maxObjects, "plugin-max-objects", plugins.DefaultMaxObjects, "live objects each plugin may have created, by host calls and as children together; a create past it is answered 403 Forbidden")
	f.Float64Var(&o.logRate, "plugin-log-rate", plugins.DefaultLogRate, "log lines per second each plugin may write on average; the excess is dropped and counted")
	f.IntVar(&o.logBurst, "plugin-log-burst", plugins.DefaultLogBurst, "log lines each plugin may write at once above --plugin-log-rate")
	f.IntVar(&o.logLines, "plugin-log-lines", plugins.DefaultLogLines, "recent log lines kept per plugin (served by `setpoint plugin logs`)")
	f.IntVar(&o.logBytes, "plugin-log-bytes", plugins.DefaultLogBytes, "bytes of recent log lines kept per plugin at most")
}

func (o *pluginLimitOptions) validate() error {
	for _, c := range []struct {
		flag string
		ok   bool
	}{
		{"--plugin-write-rate", o.writeRate >= 0}, {"--plugin-write-burst", o.writeBurst >= 0},
		{"--plugin-max-children", o.maxChildren >= 0}, {"--plugin-max-objects", o.maxObjects >= 0},
		{"--plugin-log-rate", o.logRate >= 0},
		{"--plugin-log-burst", o.logBurst >= 0}, {"--plugin-log-lines", o.logLines >= 0}, {"--plugin-log-bytes", o.logBytes >= 0},
	} {
		if !c.ok {
			return fmt.Errorf("%s: want a positive number (0 for the default)", c.flag)
		}
	}
	return nil
}

func (o pluginLimitOptions) writeLimits() plugins.WriteLimits {
	return plugins.WriteLimits{Rate: o.writeRate, Burst: o.writeBurst, MaxChildren: o.maxChildren}
}

func (o pluginLimitOptions) logOptions() plugins.LogOptions {
	return plugins.LogOptions{Rate: o.logRate, Burst: o.logBurst, MaxLines: o.logLines, MaxBytes: o.logBytes}
}
