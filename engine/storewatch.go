package engine

import (
	"context"

	"github.com/setpoint-dev/setpoint/store"
)

// storeWatch starts a store watch that ends when ctx is done. The store is
// handed a context that cannot end while Watch is still setting up, and
// ctx's end is relayed to it afterwards, so that a watch racing its own
// cancellation is stopped in one well-defined way.
func storeWatch(ctx context.Context, st store.Store, prefix string, from int64) (store.Watcher, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := st.Watch(wctx, prefix, from)
	if err != nil {
		cancel()
		return nil, err
	}
	stop := context.AfterFunc(ctx, cancel)
	return &relayWatcher{Watcher: w, cancel: cancel, stop: stop}, nil
}

// stoppedStoreWatch starts a store watch that ends on Stop (or when the
// store closes), not with ctx, whose values it keeps: for a caller that
// always stops it, as an objectWatch's goroutine does when it returns. It
// holds no context of its own and registers nothing on ctx: about 1 KB
// less per idle watch than storeWatch.
func stoppedStoreWatch(ctx context.Context, st store.Store, prefix string, from int64) (store.Watcher, error) {
	return st.Watch(context.WithoutCancel(ctx), prefix, from)
}

type relayWatcher struct {
	store.Watcher
	cancel context.CancelFunc
	stop   func() bool
}

func (w *relayWatcher) Stop() {
	w.stop()
	w.Watcher.Stop()
	w.cancel()
}
