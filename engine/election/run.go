package election

import (
	"context"
	"log/slog"
	"time"

	"github.com/setpoint-dev/setpoint/engine/controller"
)

// retryRun is how long Run waits before campaigning again after run failed
// while leading.
const retryRun = time.Second

// Run runs run whenever el leads, until ctx is done, and returns nil then
// (or el's error when it fails otherwise). Each term, run gets a context
// that ends when leadership is lost or ctx is done, and the lease is
// released only after run returned, so that no other replica starts it
// before this one stopped. When run returns while still leading (it
// failed; its error goes to log), Run gives up the lease and campaigns
// again a second later. It is how a single loop, such as the garbage
// collector, runs on one replica at a time.
func Run(ctx context.Context, log *slog.Logger, el controller.Elector, run func(ctx context.Context) error) error {
	if log == nil {
		log = slog.Default()
	}
	for {
		// The term's context outlives ctx while run stops, so that
		// the lease is released after run returned.
		term, end := context.WithCancel(context.WithoutCancel(ctx))
		unhook := context.AfterFunc(ctx, end) // while campaigning
		lctx, err := el.Lead(term)
		unhook()
		if err != nil {
			end()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		rctx, cancel := context.WithCancel(lctx)
		stop := context.AfterFunc(ctx, cancel)
		err = run(rctx)
		stop()
		cancel()
		early := lctx.Err() == nil // run returned on its own
		if early && err != nil {
			log.Warn("leader loop failed; campaigning again", "lease", leaseName(el), "err", err)
		}
		end() // run returned: release the lease
		if ctx.Err() != nil {
			return nil
		}
		if early {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retryRun):
			}
		}
	}
}

// leaseName names el's lease in logs, when it has one.
func leaseName(el controller.Elector) string {
	if e, ok := el.(*Elector); ok {
		return e.Name()
	}
	return ""
}
