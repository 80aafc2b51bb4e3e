package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine"
)

// DefaultModuleGCGrace is how long a module stays stored after no Plugin
// uses it.
const DefaultModuleGCGrace = 10 * time.Minute

// ModuleInUseError: a module cannot be deleted because Plugins use it.
type ModuleInUseError struct {
	Digest  string
	Plugins []string
}

func (e *ModuleInUseError) Error() string {
	return fmt.Sprintf("plugins: module %s is used by %v", e.Digest, e.Plugins)
}

// Unwrap makes errors.Is(err, ErrModuleInUse) hold.
func (e *ModuleInUseError) Unwrap() error { return ErrModuleInUse }

// ModuleUsage is a stored module and the Plugins that use it.
type ModuleUsage struct {
	Digest string `json:"digest"`
	Size   int    `json:"size"`
	// UsedBy names the Plugins whose spec.module.digest or
	// status.loadedDigest is the module, or that run it, sorted.
	UsedBy []string `json:"usedBy"`
}

// ModuleGC deletes modules no Plugin uses.
//
// A module is in use while a stored Plugin names it in spec.module.digest
// or status.loadedDigest (a Plugin whose new module was refused keeps
// serving the old one), or while the manager runs it. A module found unused
// is deleted once it has stayed unused for the grace period, measured from
// the first pass that found it unused or from its last upload, whichever is
// later: modules are uploaded before the Plugin that names them is written.
// That time is kept in memory only, so a restart starts every grace period
// again: it delays deletions and never hastens one.
//
// Deciding and deleting are not one transaction: a Plugin may be written to
// name a module between the pass's list of Plugins and the delete. So after
// deleting, the GC lists the Plugins again and stores again any module that
// became used (it kept the bytes from the delete). A Plugin written in that
// window may meanwhile have been reconciled without its module: its status
// says ModuleNotFound and the manager tries again within 10 s, by which time
// the module is back. A Plugin written after the second list names a module
// that is gone, as if it had never been uploaded: ModuleNotFound until it is
// uploaded again, which is an ordinary fresh upload. An upload racing a
// delete is kept (see Modules).
//
// Deleting a module also drops the host's cache of its instrumented form
// when the Host implements ModuleForgetter.
//
// Its one goroutine, Run, owns nothing but the passes; seen is shared with
// Delete under mu, which also keeps passes and explicit deletes apart.
type ModuleGC struct {
	modules  *Modules
	svc      *engine.Service
	running  func() map[string][]string // digest → Plugins the manager runs it for
	forget   ModuleForgetter            // nil when the host caches nothing
	grace    time.Duration
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	seen    map[string]unused
	orphans map[string]unused // digests with chunks and no manifest
}

// unused records since when a module is unused, and the upload mark it had
// then: a later upload starts the grace period again.
type unused struct {
	since time.Time
	mark  uint64
}

func newModuleGC(opts Options, running func() map[string][]string, log *slog.Logger) *ModuleGC {
	g := &ModuleGC{
		modules: opts.Modules, svc: opts.Service, running: running,
		grace: opts.ModuleGCGrace, interval: opts.ModuleGCInterval, now: opts.Now, log: log,
		seen: map[string]unused{}, orphans: map[string]unused{},
	}
	if f, ok := opts.Host.(ModuleForgetter); ok {
		g.forget = f
	}
	return g
}

// Run collects every interval until ctx is done. Each Run counts the grace
// periods afresh: a replica that runs it again after another replica did
// (leader election) cannot tell what happened to the modules meanwhile.
func (g *ModuleGC) Run(ctx context.Context) error {
	g.mu.Lock()
	clear(g.seen)
	clear(g.orphans)
	g.mu.Unlock()
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := g.Collect(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("module garbage collection", "err", err)
		}
	}
}

// Collect makes one pass: it notes the modules found unused and deletes
// those unused for the grace period.
func (g *ModuleGC) Collect(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	stored, err := g.modules.Digests(ctx)
	if err != nil {
		return err
	}
	users, err := g.users(ctx)
	if err != nil {
		return err
	}
	now := g.now()
	unusedNow := make(map[string]bool, len(stored))
	var doomed []candidate
	for _, digest := range stored {
		if len(users[digest]) > 0 {
			continue
		}
		unusedNow[digest] = true
		mark := g.modules.mark(digest)
		s, ok := g.seen[digest]
		if !ok || s.mark != mark {
			g.seen[digest] = unused{since: now, mark: mark}
			continue
		}
		if now.Sub(s.since) >= g.grace {
			doomed = append(doomed, candidate{digest, mark})
		}
	}
	for d := range g.seen {
		if !unusedNow[d] {
			delete(g.seen, d) // used again, or gone
		}
	}
	removed := map[string]*removedModule{}
	for _, c := range doomed {
		kv, err := g.modules.remove(ctx, c.digest, c.mark)
		switch {
		case err == nil:
			removed[c.digest] = kv
		case errors.Is(err, errUploadedAgain), errors.Is(err, ErrModuleNotFound):
			delete(g.seen, c.digest)
		default:
			g.log.Warn("delete an unused module", "digest", c.digest, "err", err)
		}
	}
	g.settle(ctx, removed)
	return g.collectOrphans(ctx, stored, now)
}

// collectOrphans deletes the chunks that no manifest names once they have
// been found so for the grace period, measured as for modules: an upload
// writes its chunks before its manifest, so chunks without a manifest are
// either an upload under way or what a crash between the two left.
func (g *ModuleGC) collectOrphans(ctx context.Context, stored []string, now time.Time) error {
	chunked, err := g.modules.chunkedDigests(ctx)
	if err != nil {
		return err
	}
	orphan := map[string]bool{}
	for _, d := range chunked {
		if _, found := slices.BinarySearch(stored, d); found {
			continue
		}
		orphan[d] = true
		mark := g.modules.mark(d)
		s, ok := g.orphans[d]
		if !ok || s.mark != mark {
			g.orphans[d] = unused{since: now, mark: mark}
			continue
		}
		if now.Sub(s.since) < g.grace {
			continue
		}
		switch err := g.modules.removeOrphanChunks(ctx, d, mark); {
		case err == nil:
			delete(g.orphans, d)
			g.log.Info("orphan module chunks deleted", "digest", d)
		case errors.Is(err, errUploadedAgain):
			delete(g.orphans, d)
		default:
			g.log.Warn("delete orphan module chunks", "digest", d, "err", err)
		}
	}
	for d := range g.orphans {
		if !orphan[d] {
			delete(g.orphans, d)
		}
	}
	return nil
}

type candidate struct {
	digest string
	mark   uint64
}

// Delete deletes the module digest at once if no Plugin uses it: it returns
// its size, a *ModuleInUseError (also when it was uploaded again while
// being deleted), or ErrModuleNotFound.
func (g *ModuleGC) Delete(ctx context.Context, digest string) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	users, err := g.users(ctx)
	if err != nil {
		return 0, err
	}
	if u := users[digest]; len(u) > 0 {
		return 0, &ModuleInUseError{Digest: digest, Plugins: u}
	}
	kv, err := g.modules.remove(ctx, digest, g.modules.mark(digest))
	if errors.Is(err, errUploadedAgain) {
		return 0, &ModuleInUseError{Digest: digest}
	}
	if err != nil {
		return 0, err
	}
	if restored := g.settle(ctx, map[string]*removedModule{digest: kv}); restored != nil {
		return 0, &ModuleInUseError{Digest: digest, Plugins: restored[digest]}
	}
	return kv.size, nil
}

// settle finishes deletes: it lists the Plugins again and stores again the
// modules one of them started to use meanwhile, returned with their users;
// for the others it drops the host's cache and logs the deletion.
func (g *ModuleGC) settle(ctx context.Context, removed map[string]*removedModule) (restored map[string][]string) {
	if len(removed) == 0 {
		return nil
	}
	// The deletes are done: whatever happens to ctx now, put back what is
	// used.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	users, err := g.users(ctx)
	if err != nil {
		g.log.Warn("cannot tell whether deleted modules are still unused; restoring them", "err", err)
	}
	for d, kv := range removed {
		delete(g.seen, d)
		if err != nil || len(users[d]) > 0 {
			if rerr := g.modules.restore(ctx, kv); rerr != nil {
				g.log.Error("restore a module used while it was deleted", "digest", d, "err", rerr)
				continue
			}
			g.log.Info("module used while it was deleted; restored", "digest", d, "plugins", users[d])
			if restored == nil {
				restored = map[string][]string{}
			}
			restored[d] = users[d]
			continue
		}
		if g.forget != nil {
			// Only the host's cache of the instrumented form is keyed by the
			// module's digest. wazero's compilation cache files are
			// wazero-internal (named by its own hash of the code, no way to
			// tell them apart from outside), so they stay.
			g.forget.ForgetModule(d)
		}
		g.log.Info("module deleted", "digest", d, "size", kv.size)
	}
	return restored
}

// Usage lists the stored modules and the Plugins that use them.
func (g *ModuleGC) Usage(ctx context.Context) ([]ModuleUsage, error) {
	stored, err := g.modules.List(ctx)
	if err != nil {
		return nil, err
	}
	users, err := g.users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ModuleUsage, 0, len(stored))
	for _, m := range stored {
		u := users[m.Digest]
		if u == nil {
			u = []string{}
		}
		out = append(out, ModuleUsage{Digest: m.Digest, Size: m.Size, UsedBy: u})
	}
	return out, nil
}

// users maps each module in use to the Plugins using it, sorted.
func (g *ModuleGC) users(ctx context.Context) (map[string][]string, error) {
	list, err := g.svc.List(ctx, Resource, "", metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("plugins: list Plugins: %w", err)
	}
	out := map[string][]string{}
	add := func(digest, name string) {
		if digest != "" && !slices.Contains(out[digest], name) {
			out[digest] = append(out[digest], name)
		}
	}
	for i := range list.Items {
		p := &list.Items[i]
		spec, _, _ := unstructured.NestedString(p.Object, "spec", "module", "digest")
		add(spec, p.GetName())
		loaded, _, _ := unstructured.NestedString(p.Object, "status", "loadedDigest")
		add(loaded, p.GetName())
	}
	if g.running != nil {
		for d, names := range g.running() {
			for _, n := range names {
				add(d, n)
			}
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out, nil
}
