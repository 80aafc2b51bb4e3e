package plugins

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeClock is a settable clock for the log's rate limit.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func messages(lines []LogLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Message
	}
	return out
}

func TestLogsRingBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      LogOptions
		add       int
		msgSize   int
		wantLines int
	}{
		{name: "lines", opts: LogOptions{MaxLines: 10, Rate: 1e9, Burst: 1e6}, add: 25, msgSize: 10, wantLines: 10},
		{name: "bytes", opts: LogOptions{MaxLines: 1000, MaxBytes: 5 * (64 + 100), Rate: 1e9, Burst: 1e6}, add: 25, msgSize: 100, wantLines: 5},
		{name: "under both", opts: LogOptions{MaxLines: 100, Rate: 1e9, Burst: 1e6}, add: 7, msgSize: 10, wantLines: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLogs(tc.opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.add {
				msg := fmt.Sprintf("%0*d", tc.msgSize, i)
				if !l.Add("p", LogLine{Message: msg}) {
					t.Fatalf("line %d dropped", i)
				}
			}
			got, next := l.Lines("p", LogQuery{})
			if len(got) != tc.wantLines || next != uint64(tc.add) {
				t.Fatalf("kept %d lines (next %d), want %d (next %d)", len(got), next, tc.wantLines, tc.add)
			}
			// The newest are kept, oldest first.
			for i, m := range messages(got) {
				if want := fmt.Sprintf("%0*d", tc.msgSize, tc.add-tc.wantLines+i); m != want {
					t.Fatalf("line %d = %q, want %q", i, m, want)
				}
			}
		})
	}
}

// A plugin that logs in a tight loop keeps its burst, then its rate; the
// rest is dropped, counted in the metric, and noted in the log.
func TestLogsRateLimitCountsDrops(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	l, err := NewLogs(LogOptions{Rate: 10, Burst: 20, Now: clock.now}, reg)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for i := range 10000 {
		if l.Add("loud", LogLine{Message: fmt.Sprint("line ", i)}) {
			kept++
		}
	}
	if kept != 20 {
		t.Fatalf("kept %d lines at once, want the burst of 20", kept)
	}
	if got := testutil.ToFloat64(l.dropped.WithLabelValues("loud")); got != 9980 {
		t.Errorf("dropped metric = %v, want 9980", got)
	}
	clock.add(time.Second)
	if !l.Add("loud", LogLine{Message: "after a second"}) {
		t.Fatal("a line a second later was dropped")
	}
	lines, _ := l.Lines("loud", LogQuery{})
	msgs := messages(lines)
	var notes []string
	for _, m := range msgs {
		if strings.Contains(m, "lines dropped") {
			notes = append(notes, m)
		}
	}
	// One note at the first drop (1 line), one before the next kept line.
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "1 lines dropped") || !strings.HasPrefix(notes[1], "9979 lines dropped") {
		t.Errorf("drop notes = %q", notes)
	}
	if msgs[len(msgs)-1] != "after a second" {
		t.Errorf("last line = %q", msgs[len(msgs)-1])
	}
	// Another plugin has a bucket of its own.
	if !l.Add("quiet", LogLine{Message: "hello"}) {
		t.Error("another plugin's line was dropped")
	}
}

// Memory stays bounded however much a plugin logs.
func TestLogsMemoryBounded(t *testing.T) {
	l, err := NewLogs(LogOptions{Rate: 1e9, Burst: 1e9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4096)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 20000 { // 80 MiB of messages
		l.Add("p", LogLine{Message: big + "!"}) // a new string each time
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	lines, _ := l.Lines("p", LogQuery{})
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("80 MiB logged: %d lines kept, heap grew %d KiB", len(lines), grew>>10)
	if len(lines) > 256 || grew > 4<<20 {
		t.Errorf("kept %d lines, heap grew %d bytes; want at most 1 MiB of lines", len(lines), grew)
	}
}

func TestLogsQuery(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, _ := NewLogs(LogOptions{}, nil)
	l.Add("p", LogLine{Time: t0, Kind: "Widget", Namespace: "default", Name: "a", Message: "one"})
	l.Add("p", LogLine{Time: t0.Add(time.Minute), Kind: "Widget", Namespace: "default", Name: "b", Message: "two"})
	l.Add("p", LogLine{Time: t0.Add(2 * time.Minute), Kind: "Widget", Namespace: "default", Name: "a", Message: "three"})
	for _, tc := range []struct {
		name string
		q    LogQuery
		want string
	}{
		{name: "all", q: LogQuery{}, want: "one two three"},
		{name: "tail", q: LogQuery{Tail: 2}, want: "two three"},
		{name: "tail none", q: LogQuery{Tail: -1}, want: ""},
		{name: "since", q: LogQuery{Since: t0.Add(time.Minute)}, want: "two three"},
		{name: "object", q: LogQuery{Kind: "widget", Name: "a"}, want: "one three"},
		{name: "object with namespace", q: LogQuery{Kind: "Widget", Name: "default/b"}, want: "two"},
		{name: "object and tail", q: LogQuery{Kind: "Widget", Name: "a", Tail: 1}, want: "three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := l.Lines("p", tc.q)
			if s := strings.Join(messages(got), " "); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
	if got, _ := l.Lines("nobody", LogQuery{}); got != nil {
		t.Errorf("a plugin that never logged: %v", got)
	}
}

func TestLogLineString(t *testing.T) {
	l := LogLine{Time: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Level: slog.LevelWarn,
		Kind: "Widget", Namespace: "default", Name: "w1", Message: "two\nlines",
		Attrs: map[string]string{"size": "small", "note": "has space"}}
	want := `2026-01-02T03:04:05.000006000Z WARN Widget default/w1 two\nlines note="has space" size=small`
	if got := l.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := (LogLine{Time: l.Time, Message: "m"}).String(); got != "2026-01-02T03:04:05.000006000Z INFO - m" {
		t.Errorf("no object: %s", got)
	}
}

func TestLogsFollow(t *testing.T) {
	l, _ := NewLogs(LogOptions{}, nil)
	l.Add("p", LogLine{Message: "old"})
	_, next := l.Lines("p", LogQuery{})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(ctx, "p", LogQuery{Kind: "Widget", Name: "a"}, next, func(lines []LogLine) error {
			for _, m := range messages(lines) {
				got <- m
			}
			return nil
		})
	}()
	l.Add("p", LogLine{Kind: "Widget", Name: "b", Message: "other object"})
	l.Add("p", LogLine{Kind: "Widget", Name: "a", Message: "new"})
	select {
	case m := <-got:
		if m != "new" {
			t.Errorf("followed %q, want new", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not see the new line")
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Follow = %v, want context.Canceled", err)
	}
}

// The host's logger, wrapped by Handler, sends plugin log records to the
// plugin's log and, rate permitting, to the server's log; other records
// pass untouched.
func TestLogHandlerRoutesPluginLines(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := NewLogs(LogOptions{Rate: 1, Burst: 2, Now: clock.now}, nil)
	var server bytes.Buffer
	base := slog.New(slog.NewTextHandler(&server, &slog.HandlerOptions{Level: slog.LevelInfo}))
	hostLog := slog.New(l.Handler(base.With("component", "host").Handler())).With("plugin", "widget")
	for i := range 5 {
		hostLog.LogAttrs(context.Background(), slog.LevelInfo, PluginLogMessage,
			slog.String("kind", "Widget"), slog.String("namespace", "default"), slog.String("name", "w1"),
			slog.String("message", fmt.Sprint("hello ", i)), slog.Group("attrs", slog.String("size", "small")))
	}
	hostLog.Debug(PluginLogMessage, "message", "debug line") // dropped too: over the rate
	hostLog.Info("instance started")
	lines, _ := l.Lines("widget", LogQuery{})
	if len(lines) != 3 || lines[0].Message != "hello 0" || lines[0].Kind != "Widget" || lines[0].Attrs["size"] != "small" ||
		!strings.Contains(lines[2].Message, "lines dropped") {
		t.Fatalf("plugin log = %+v", lines)
	}
	out := server.String()
	if n := strings.Count(out, "plugin log"); n != 2 {
		t.Errorf("server log has %d plugin lines, want the 2 kept:\n%s", n, out)
	}
	if !strings.Contains(out, "instance started") || !strings.Contains(out, "component=host") {
		t.Errorf("server log lost a host record:\n%s", out)
	}
}

func TestLogQueryParams(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, query string
		want        LogQuery
		follow      bool
		err         string
	}{
		{name: "none", query: ""},
		{name: "all", query: "follow=true&sinceTime=2026-01-01T11:00:00Z&tailLines=5&object=Widget/default/w1",
			want: LogQuery{Since: now.Add(-time.Hour), Tail: 5, Kind: "Widget", Name: "default/w1"}, follow: true},
		{name: "sinceSeconds", query: "sinceSeconds=60", want: LogQuery{Since: now.Add(-time.Minute)}},
		{name: "sinceTime with nanoseconds", query: "sinceTime=2026-01-01T11:00:00.000000005Z", want: LogQuery{Since: now.Add(-time.Hour + 5)}},
		{name: "tailLines 0 is none", query: "tailLines=0", want: LogQuery{Tail: -1}},
		{name: "bad follow", query: "follow=maybe", err: "follow="},
		{name: "bad sinceTime", query: "sinceTime=yesterday", err: "sinceTime="},
		{name: "both since", query: "sinceTime=2026-01-01T11:00:00Z&sinceSeconds=5", err: "at most one"},
		{name: "negative tail", query: "tailLines=-1", err: "tailLines="},
		{name: "bad object", query: "object=Widget", err: "object="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", PluginsPath+"/p/log?"+tc.query, nil)
			q, follow, err := logQuery(r, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil || follow != tc.follow || !q.Since.Equal(tc.want.Since) || q.Tail != tc.want.Tail || q.Kind != tc.want.Kind || q.Name != tc.want.Name {
				t.Errorf("got %+v follow %v err %v, want %+v follow %v", q, follow, err, tc.want, tc.follow)
			}
		})
	}
	for path, want := range map[string]string{PluginsPath + "/w/log": "w", PluginsPath + "/w": "", PluginsPath + "/a/b/log": "", PluginsPath + "//log": ""} {
		if got, _ := LogPluginName(path); got != want {
			t.Errorf("LogPluginName(%q) = %q, want %q", path, got, want)
		}
	}
}
