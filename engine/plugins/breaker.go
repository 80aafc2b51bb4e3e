package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// The circuit breaker of a plugin's calls. A plugin whose calls keep
// failing (traps, timeouts, the memory cap, bad output) is not called for
// a while: each failed call may have held a core until its deadline, or
// rebuilt its instance, and a plugin called constantly would take that
// share of the server from everything else. After breakerThreshold
// failures in a row its calls are refused at once for breakerMinOpen; then
// one call is let through (half-open): if it succeeds calls resume, if it
// fails they are refused again for twice as long, up to breakerMaxOpen.
// A failed call's duration counts too (calltime.go): a failure that held a
// core for long opens the breaker at once, for as long as it takes the
// plugin's budget of failed call time to be paid back.
const (
	breakerThreshold = 5
	breakerMinOpen   = 2 * time.Second
	breakerMaxOpen   = time.Minute
)

// ErrCallsSuspended: the plugin's calls are refused for a while after
// repeated failures; the error is a *CallsSuspendedError.
var ErrCallsSuspended = errors.New("plugins: calls suspended after repeated failures")

// CallsSuspendedError is the error of a call the breaker refused.
type CallsSuspendedError struct {
	Plugin string
	// Calls is what is suspended: "reconcile and finalize" or "admit".
	Calls string
	// Failures is the number of failed calls in a row that opened it.
	Failures int
	// Cause says why it opened: failures in a row, or failed call time.
	Cause string
	// Retry is when one call is let through again.
	Retry time.Time
	// Last is the last failure.
	Last string
}

func (e *CallsSuspendedError) Error() string {
	return fmt.Sprintf("plugin %q: %s calls suspended after %s (last: %s); one call is let through after a backoff to see whether the plugin recovered",
		e.Plugin, e.Calls, e.Cause, e.Last)
}

// CallsSuspended marks the error for the controller (controller.Suspended).
func (e *CallsSuspendedError) CallsSuspended() {}

func (e *CallsSuspendedError) Unwrap() error { return ErrCallsSuspended }

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen // one trial call in flight
)

// breaker guards one class of a plugin's calls.
type breaker struct {
	plugin, calls string
	now           func() time.Time
	// open and refused, when set, are the Prometheus series.
	openGauge  prometheus.Gauge
	refusedCtr prometheus.Counter

	// healthy is set while the breaker is closed with no failed call in a
	// row: a call then runs, and a successful one changes nothing, so
	// neither takes mu. It is kept by setLocked.
	healthy atomic.Bool

	mu       sync.Mutex
	state    breakerState
	failures int           // failed calls in a row
	openFor  time.Duration // of the current or last opening
	retry    time.Time     // when an open breaker lets a trial call through
	last     string        // last failure
	spent    callTimeDebt  // failed call time
	cause    string        // why it last opened
	opened   int64         // times opened since created or reset
	closedAt int64         // opened count when it last closed after opening
	since    time.Time     // of the last transition between open and closed
	refused  int64
}

func newBreaker(plugin, calls string, now func() time.Time, open prometheus.Gauge, refused prometheus.Counter) *breaker {
	b := &breaker{plugin: plugin, calls: calls, now: now, openGauge: open, refusedCtr: refused}
	b.healthy.Store(true)
	return b
}

// setLocked updates healthy after a change of state or failures; b.mu is
// held.
func (b *breaker) setLocked() {
	b.healthy.Store(b.state == breakerClosed && b.failures == 0)
}

// allow says whether a call may run; trial is set for the one call a
// breaker lets through after its open period.
func (b *breaker) allow() (trial bool, err error) {
	if b.healthy.Load() {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.setLocked()
	switch b.state {
	case breakerClosed:
		return false, nil
	case breakerOpen:
		if !b.now().Before(b.retry) {
			b.state = breakerHalfOpen
			return true, nil
		}
	}
	b.refused++
	if b.refusedCtr != nil {
		b.refusedCtr.Inc()
	}
	return false, &CallsSuspendedError{Plugin: b.plugin, Calls: b.calls, Failures: b.failures, Cause: b.cause, Retry: b.retry, Last: b.last}
}

// done records the outcome of a call allow let run, and how long it took.
func (b *breaker) done(trial bool, err error, took time.Duration) {
	if err == nil && b.healthy.Load() {
		return // closed, with no failures to forget
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.setLocked()
	if err == nil {
		b.failures = 0
		if b.state != breakerClosed {
			b.state, b.openFor, b.since, b.closedAt = breakerClosed, 0, b.now(), b.opened
			b.setGauge(0)
		}
		return
	}
	b.failures++
	msg := err.Error()
	if len(msg) > 512 {
		msg = msg[:509] + "..."
	}
	b.last = msg
	hold := min(b.spent.charge(b.now(), took), breakerMaxOpen)
	cause := fmt.Sprintf("%d failed calls in a row", b.failures)
	if hold > 0 {
		cause = fmt.Sprintf("failed calls that ran %v in all (the last %v); failing calls may take %.0f%% of one core", b.spent.debt.Round(time.Millisecond), took.Round(time.Millisecond), failedCallShare*100)
	}
	switch {
	case trial && b.state == breakerHalfOpen: // not reset meanwhile
		b.openLocked(max(breakerMinOpen, min(2*b.openFor, breakerMaxOpen), hold), cause)
	case b.state == breakerClosed && (b.failures >= breakerThreshold || hold > 0):
		b.openLocked(max(breakerMinOpen, hold), cause)
	case b.state == breakerOpen && hold > 0 && b.now().Add(hold).After(b.retry):
		// A call that was running when the breaker opened failed slowly
		// too: the open period lasts until the budget is paid back.
		b.openFor, b.retry = hold, b.now().Add(hold)
	}
}

func (b *breaker) openLocked(d time.Duration, cause string) {
	if b.state == breakerClosed {
		b.opened++
		b.since = b.now()
	}
	b.state, b.openFor, b.retry, b.cause = breakerOpen, d, b.now().Add(d), cause
	b.setGauge(1)
}

func (b *breaker) setGauge(v float64) {
	if b.openGauge != nil {
		b.openGauge.Set(v)
	}
}

// reset closes the breaker: a new spec, module or host configuration is
// called again at once.
func (b *breaker) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.setLocked()
	if b.state != breakerClosed {
		b.since, b.closedAt = b.now(), b.opened
		b.setGauge(0)
	}
	b.state, b.failures, b.openFor = breakerClosed, 0, 0
	b.spent.clear()
}

// breakerView is what the Plugin's status and events show of a breaker.
type breakerView struct {
	calls          string
	open           bool
	opened, closed int64 // times opened; opened count when last closed
	failures       int
	openFor        time.Duration
	retry, since   time.Time
	last, cause    string
	refused        int64
}

func (b *breaker) view() breakerView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return breakerView{calls: b.calls, open: b.state != breakerClosed, opened: b.opened, closed: b.closedAt,
		failures: b.failures, openFor: b.openFor, retry: b.retry, since: b.since, last: b.last, cause: b.cause, refused: b.refused}
}

// guard runs call unless b refuses it, and records its outcome. A call the
// caller gave up on (its context done) says nothing about the plugin.
func guard[R any](ctx context.Context, b *breaker, call func() (R, error)) (R, error) {
	trial, err := b.allow()
	if err != nil {
		var zero R
		return zero, err
	}
	start := b.now()
	r, err := call()
	took := b.now().Sub(start)
	if err != nil && ctx.Err() != nil {
		if trial {
			b.mu.Lock()
			b.state = breakerOpen // let the next call be the trial
			b.setLocked()
			b.mu.Unlock()
		}
		return r, err
	}
	b.done(trial, err, took)
	return r, err
}

// breakers are the breakers of one Plugin: its reconcile and finalize
// calls share one, its admission calls have their own, so that a plugin
// whose reconciles fail keeps admitting, and the reverse.
type breakers struct {
	reconcile, admit *breaker
	mu               sync.Mutex
	// reported is what the Plugin's events last said, by class: times
	// opened, and the opened count when last closed.
	reported   map[string][2]int64
	generation int64 // of the Plugin last reconciled
}

func newBreakers(plugin string, met *metrics, now func() time.Time) *breakers {
	bs := &breakers{reported: map[string][2]int64{}}
	var openR, openA prometheus.Gauge
	var refR, refA prometheus.Counter
	if met != nil {
		openR, openA = met.breakerOpen.WithLabelValues(plugin, "reconcile"), met.breakerOpen.WithLabelValues(plugin, "admit")
		refR, refA = met.suspended.WithLabelValues(plugin, "reconcile"), met.suspended.WithLabelValues(plugin, "admit")
	}
	bs.reconcile = newBreaker(plugin, "reconcile and finalize", now, openR, refR)
	bs.admit = newBreaker(plugin, "admit", now, openA, refA)
	return bs
}

// observe resets the breakers when the Plugin's generation changed: its
// author changed the spec, perhaps to fix what failed.
func (bs *breakers) observe(generation int64) {
	bs.mu.Lock()
	changed := bs.generation != 0 && bs.generation != generation
	bs.generation = generation
	bs.mu.Unlock()
	if changed {
		bs.reset()
	}
}

func (bs *breakers) reset() {
	bs.reconcile.reset()
	bs.admit.reset()
}

// ConditionCallsSuspended says whether the breaker refuses a Plugin's
// calls after repeated failures; it appears once the breaker opened.
const ConditionCallsSuspended = "CallsSuspended"

// Reasons of the CallsSuspended condition, and of its events.
const (
	ReasonRepeatedFailures = "RepeatedFailures"
	ReasonCallsResumed     = "CallsResumed"
)

// condition is the CallsSuspended condition, nil while no breaker ever
// opened.
func (bs *breakers) condition(generation int64) map[string]any {
	var open []breakerView
	var last breakerView
	for _, b := range []*breaker{bs.reconcile, bs.admit} {
		v := b.view()
		if v.opened == 0 {
			continue
		}
		if v.open {
			open = append(open, v)
		}
		if v.since.After(last.since) {
			last = v
		}
	}
	if last.opened == 0 {
		return nil
	}
	c := map[string]any{"type": ConditionCallsSuspended, "observedGeneration": generation}
	if len(open) == 0 {
		c["status"], c["reason"] = string(metav1.ConditionFalse), ReasonCallsResumed
		c["message"] = "calls resumed: a call succeeded, or the spec or module changed"
		c["lastTransitionTime"] = last.since.UTC().Format(time.RFC3339)
		return c
	}
	msg := ""
	since := open[0].since
	for i, o := range open {
		if i > 0 {
			msg += "; "
		}
		msg += fmt.Sprintf("%s calls suspended after %s, retried one at a time with backoff (last failure: %s)", o.calls, o.cause, o.last)
		if o.since.Before(since) {
			since = o.since
		}
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	c["status"], c["reason"], c["message"] = string(metav1.ConditionTrue), ReasonRepeatedFailures, msg
	c["lastTransitionTime"] = since.UTC().Format(time.RFC3339)
	return c
}

// events are the events of the breakers' changes since the last call: a
// Warning when one opened, a Normal one when it closed.
func (bs *breakers) events() []abi.Event {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var out []abi.Event
	for _, b := range []*breaker{bs.reconcile, bs.admit} {
		v := b.view()
		was := bs.reported[v.calls]
		if v.opened > was[0] {
			out = append(out, abi.Event{Type: "Warning", Reason: ReasonRepeatedFailures, Message: fmt.Sprintf(
				"%s calls suspended after %s (last: %s); the server lets one call through after %s, then backs off up to %s while calls keep failing",
				v.calls, v.cause, v.last, v.openFor.Round(time.Millisecond), breakerMaxOpen)})
		}
		if v.closed > was[1] {
			out = append(out, abi.Event{Type: "Normal", Reason: ReasonCallsResumed, Message: v.calls + " calls resumed: a call succeeded, or the spec or module changed"})
		}
		bs.reported[v.calls] = [2]int64{v.opened, v.closed}
	}
	return out
}

// breakerCaller refuses calls while the plugin's breakers are open.
// It implements controller.FailureRecorder through the countingCaller.
type breakerCaller struct {
	countingCaller
	b *breakers
}

var (
	_ controller.FailureRecorder = breakerCaller{}
	_ controller.Suspended       = (*CallsSuspendedError)(nil)
)

func (bc breakerCaller) Reconcile(ctx context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	return guard(ctx, bc.b.reconcile, func() (*abi.ReconcileResponse, error) { return bc.countingCaller.Reconcile(ctx, req) })
}

func (bc breakerCaller) Admit(ctx context.Context, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	return guard(ctx, bc.b.admit, func() (*abi.AdmissionResponse, error) { return bc.countingCaller.Admit(ctx, req) })
}

func (bc breakerCaller) Finalize(ctx context.Context, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	return guard(ctx, bc.b.reconcile, func() (*abi.FinalizeResponse, error) { return bc.countingCaller.Finalize(ctx, req) })
}
