package plugins

import "time"

// The call-time budget of a plugin's failing calls. A call that fails after
// running for a while (a spin stopped by the call timeout, a guest growing
// its memory to the cap) took a core for that long and bought nothing; the
// count of failures in a row does not see that one such call costs as much
// as thousands of traps. So each class of a plugin's calls has a budget of
// failed call time, a token bucket: failed calls take their duration from
// it, and it refills at failedCallShare of one core. When a failure leaves
// it more than failedCallBurst in debt the breaker opens at once, for at
// least as long as the debt takes to drain. A plugin whose calls keep
// failing slowly thus gets at most failedCallShare of one core on average,
// whatever its call timeout or pool size: a spinner stopped at its 1 s
// timeout is suspended for 10 s, and its one trial call after that costs
// another second, another 10 s.
//
// Calls that succeed take nothing: a plugin doing useful work is bounded by
// its pool size and call timeout, not by this budget. The duration is the
// call's wall time, an upper bound of the CPU time it used (it includes a
// wait for a free instance, and host calls).
const (
	failedCallShare = 0.1
	failedCallBurst = 500 * time.Millisecond
)

// callTimeDebt is the state of one budget; its breaker's mutex guards it.
type callTimeDebt struct {
	debt time.Duration // failed call time not yet paid back
	at   time.Time     // when debt was last brought up to date
}

// charge takes a failed call of duration d at now, and says for how long
// the breaker must stay open for the budget to be paid back: zero while the
// debt is within failedCallBurst.
func (c *callTimeDebt) charge(now time.Time, d time.Duration) time.Duration {
	if !c.at.IsZero() {
		paid := time.Duration(float64(now.Sub(c.at)) * failedCallShare)
		c.debt = max(0, c.debt-paid)
	}
	c.at = now
	c.debt += max(0, d)
	if c.debt <= failedCallBurst {
		return 0
	}
	return time.Duration(float64(c.debt) / failedCallShare)
}

// clear forgets the debt: the spec, module or host configuration changed.
func (c *callTimeDebt) clear() { *c = callTimeDebt{} }
