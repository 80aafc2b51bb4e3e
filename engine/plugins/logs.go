package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// LogOptions bound what each plugin's log keeps and how fast a plugin may
// write to it. Zero values get the defaults.
type LogOptions struct {
	// MaxLines is how many recent lines a plugin's log keeps. Default 1000.
	MaxLines int
	// MaxBytes bounds the text of the lines a plugin's log keeps. Default
	// 1 MiB.
	MaxBytes int
	// Rate is how many lines per second a plugin may log on average; the
	// lines past it are dropped and counted. Default 100.
	Rate float64
	// Burst is how many lines a plugin may log at once above Rate. Default
	// 200.
	Burst int
	// Now is the clock of the lines and the rate limit. Default time.Now.
	Now func() time.Time
}

// Defaults of LogOptions.
const (
	DefaultLogLines = 1000
	DefaultLogBytes = 1 << 20
	DefaultLogRate  = 100
	DefaultLogBurst = 200
)

func (o LogOptions) withDefaults() LogOptions {
	if o.MaxLines <= 0 {
		o.MaxLines = DefaultLogLines
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultLogBytes
	}
	if o.Rate <= 0 {
		o.Rate = DefaultLogRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultLogBurst
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// logTimeLayout is RFC 3339 with nanoseconds always in nine digits.
const logTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// LogLine is one line of a plugin's log.
type LogLine struct {
	Time  time.Time
	Level slog.Level
	// Kind, Namespace and Name are the object the call was about, empty
	// when none.
	Kind, Namespace, Name string
	Message               string
	// Attrs are the plugin's key-value pairs.
	Attrs map[string]string
}

// String formats the line as the log subresource serves it: time (RFC 3339,
// UTC, nanoseconds in nine digits, so that the lines align), level, object ("Kind namespace/name", "-" when none),
// message, then the attributes as key=value sorted by key, with values
// quoted where they need it; no newline.
func (l LogLine) String() string {
	var b strings.Builder
	b.WriteString(l.Time.UTC().Format(logTimeLayout))
	b.WriteByte(' ')
	b.WriteString(l.Level.String())
	b.WriteByte(' ')
	b.WriteString(l.object())
	b.WriteByte(' ')
	b.WriteString(oneLine(l.Message))
	keys := make([]string, 0, len(l.Attrs))
	for k := range l.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(oneLine(k))
		b.WriteByte('=')
		v := l.Attrs[k]
		if v == "" || strings.ContainsAny(v, " \t\r\n\"=") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

func (l LogLine) object() string {
	switch {
	case l.Kind == "" && l.Name == "":
		return "-"
	case l.Namespace == "":
		return l.Kind + " " + l.Name
	}
	return l.Kind + " " + l.Namespace + "/" + l.Name
}

// oneLine keeps a plugin's text on one line of the log.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

// size is what a line counts against LogOptions.MaxBytes.
func (l LogLine) size() int {
	n := 64 + len(l.Kind) + len(l.Namespace) + len(l.Name) + len(l.Message)
	for k, v := range l.Attrs {
		n += len(k) + len(v) + 2
	}
	return n
}

// Logs keeps each plugin's recent log lines, bounded in lines and bytes,
// and rate-limits each plugin's logging: the lines past the limit are
// dropped, counted in setpoint_plugin_log_lines_dropped_total, and noted in
// the log as one "N lines dropped" line. It is safe for concurrent use.
type Logs struct {
	opts    LogOptions
	dropped *prometheus.CounterVec // nil: not registered

	mu   sync.Mutex // guards logs
	logs map[string]*pluginLog
}

// NewLogs returns an empty Logs; reg, when set, gets the drop counter.
func NewLogs(opts LogOptions, reg prometheus.Registerer) (*Logs, error) {
	l := &Logs{opts: opts.withDefaults(), logs: map[string]*pluginLog{}}
	if reg != nil {
		l.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "setpoint", Subsystem: "plugin", Name: "log_lines_dropped_total",
			Help: "Plugin log lines dropped because the plugin logged faster than its log rate limit.",
		}, []string{"plugin"})
		if err := reg.Register(l.dropped); err != nil {
			return nil, fmt.Errorf("plugins: register log metrics: %w", err)
		}
	}
	return l, nil
}

// pluginLog is one plugin's ring of lines. Each line has a sequence number,
// so that a follower resumes after the last line it wrote.
type pluginLog struct {
	mu      sync.Mutex // guards the fields below
	ring    []entry    // len MaxLines once full; oldest at head
	head, n int
	bytes   int
	next    uint64 // sequence number of the next line
	limiter *rate.Limiter
	// pending counts the lines dropped since the last drop note; noted is
	// when that note was written.
	pending int
	noted   time.Time
	// wake is closed, and replaced, when a line is added.
	wake chan struct{}
}

type entry struct {
	seq  uint64
	line LogLine
}

func (l *Logs) get(plugin string, create bool) *pluginLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.logs[plugin]
	if p == nil && create {
		p = &pluginLog{
			ring:    make([]entry, 0, min(l.opts.MaxLines, 64)),
			limiter: rate.NewLimiter(rate.Limit(l.opts.Rate), l.opts.Burst),
			wake:    make(chan struct{}),
		}
		l.logs[plugin] = p
	}
	return p
}

// Add appends a line to the plugin's log, unless the plugin logs faster
// than the rate limit allows; it reports whether the line was kept. It is
// the sink of the log host functions.
func (l *Logs) Add(plugin string, line LogLine) bool {
	now := l.opts.Now()
	if line.Time.IsZero() {
		line.Time = now
	}
	p := l.get(plugin, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.limiter.AllowN(now, 1) {
		p.pending++
		if l.dropped != nil {
			l.dropped.WithLabelValues(plugin).Inc()
		}
		if now.Sub(p.noted) >= time.Second {
			l.noteDropsLocked(p, now)
		}
		return false
	}
	if p.pending > 0 {
		l.noteDropsLocked(p, now)
	}
	l.appendLocked(p, line)
	return true
}

// noteDropsLocked writes the "N lines dropped" line; p.mu is held.
func (l *Logs) noteDropsLocked(p *pluginLog, now time.Time) {
	l.appendLocked(p, LogLine{Time: now, Level: slog.LevelWarn, Message: fmt.Sprintf(
		"%d lines dropped: the plugin logs faster than %g lines/s (burst %d)", p.pending, l.opts.Rate, l.opts.Burst)})
	p.pending, p.noted = 0, now
}

func (l *Logs) appendLocked(p *pluginLog, line LogLine) {
	e := entry{seq: p.next, line: line}
	p.next++
	sz := line.size()
	for p.n > 0 && (p.n >= l.opts.MaxLines || p.bytes+sz > l.opts.MaxBytes) {
		p.bytes -= p.ring[p.head].line.size()
		p.ring[p.head] = entry{}
		p.head = (p.head + 1) % len(p.ring)
		p.n--
	}
	if p.n == len(p.ring) {
		// Full below MaxLines (the loop above made room for one): grow.
		p.ring = append(slices.Concat(p.ring[p.head:], p.ring[:p.head]), e)
		p.head = 0
	} else {
		p.ring[(p.head+p.n)%len(p.ring)] = e
	}
	p.n++
	p.bytes += sz
	close(p.wake)
	p.wake = make(chan struct{})
}

// Forget drops a deleted plugin's log and its series.
func (l *Logs) Forget(plugin string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.logs, plugin)
	l.mu.Unlock()
	if l.dropped != nil {
		l.dropped.DeleteLabelValues(plugin)
	}
}

// LogQuery selects lines of a plugin's log, as pods/log does.
type LogQuery struct {
	// Since keeps the lines at or after it, when set.
	Since time.Time
	// Tail keeps the last Tail lines of those selected, when positive;
	// none when negative.
	Tail int
	// Kind and Name keep the lines about that object, when set; Kind
	// compares without case, Name is "name" or "namespace/name".
	Kind, Name string
}

func (q LogQuery) match(l LogLine) bool {
	if !q.Since.IsZero() && l.Time.Before(q.Since) {
		return false
	}
	if q.Kind != "" && !strings.EqualFold(q.Kind, l.Kind) {
		return false
	}
	if q.Name != "" && q.Name != l.Name && q.Name != l.Namespace+"/"+l.Name {
		return false
	}
	return true
}

// Lines returns the plugin's lines that q selects, oldest first, and the
// sequence number to follow from.
func (l *Logs) Lines(plugin string, q LogQuery) ([]LogLine, uint64) {
	p := l.get(plugin, false)
	if p == nil {
		return nil, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []LogLine
	for i := range p.n {
		if e := p.ring[(p.head+i)%len(p.ring)]; q.match(e.line) {
			out = append(out, e.line)
		}
	}
	if q.Tail < 0 {
		out = nil
	}
	if q.Tail > 0 && len(out) > q.Tail {
		out = out[len(out)-q.Tail:]
	}
	return out, p.next
}

// Follow calls emit with each line q selects that is added from sequence
// number from on, until ctx is done or emit fails. Lines evicted before a
// slow follower reads them are skipped.
func (l *Logs) Follow(ctx context.Context, plugin string, q LogQuery, from uint64, emit func([]LogLine) error) error {
	q.Tail, q.Since = 0, time.Time{}
	for {
		p := l.get(plugin, true)
		p.mu.Lock()
		var out []LogLine
		for i := range p.n {
			e := p.ring[(p.head+i)%len(p.ring)]
			if e.seq >= from && q.match(e.line) {
				out = append(out, e.line)
			}
		}
		from = p.next
		wake := p.wake
		p.mu.Unlock()
		if len(out) > 0 {
			if err := emit(out); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}
