// Package workqueue is the per-controller work queue of the reconciliation
// engine. It owns the order in which keys are reconciled and nothing else: it
// knows no objects, no store and no plugins, and imports nothing of Setpoint.
//
// A Queue gives these guarantees, the ones controllers are written against:
//
//   - Deduplication: a key added many times before a worker takes it is handed
//     out once.
//   - Exclusion: a key is held by at most one worker at a time, between Get and
//     Done. A key added while it is held is handed out again after Done.
//   - Fairness: keys are handed out in the order they were first added.
//   - Delays: AddAfter hands a key out once its delay has passed (a controller's
//     RequeueAfter); of several pending delays for one key the earliest wins.
//   - Rate limiting: AddRateLimited delays a key by its RateLimiter: by default
//     the larger of a per-key exponential backoff (5 ms doubling up to 1000 s)
//     and an overall token bucket (10 per second, burst 100). Forget resets a
//     key's backoff after a success; NumRequeues reports its failure count.
//   - Shutdown: ShutDown makes Get return shutdown once the ready keys are
//     handed out; ShutDownWithDrain also waits for the held keys to be Done.
//
// Metrics (depth, adds, retries, queue latency, work duration, unfinished work,
// longest running) go to a MetricsProvider; PrometheusProvider is the one the
// server uses.
//
// # Threads
//
// A Queue starts no goroutine of its own. Delayed keys and the refresh of the
// unfinished-work gauges run from time.AfterFunc callbacks that take the
// queue's lock and never block; ShutDown stops both timers.
//
// Time comes from the time package, so tests run the queue inside a
// testing/synctest bubble, where backoff and delays elapse without sleeping.
package workqueue
