package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// Options configures a Service. Zero values get defaults in New.
type Options struct {
	// Store holds the objects. Required.
	Store store.Store
	// Logger receives the engine's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Admitter, when set, is called on every write (see Admitter).
	Admitter Admitter
	// BookmarkInterval is how often a watch that allows bookmarks gets one; 15s by default.
	BookmarkInterval time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// SharedStore tells the Service that other servers write to its store
	// (replicas on etcd): see kinds.Registry.SharedStore and readThroughCRD.
	SharedStore bool
	// MaxObjectBytes bounds the size of a stored object, encoded;
	// DefaultMaxObjectBytes (etcd's 1.5 MiB) by default. See fitObject.
	MaxObjectBytes int
	// Auditor, when set, records the writes made as one of the server's
	// own identities (WithSystemUser); the API audits its requests itself.
	Auditor WriteAuditor
}

// Service is the object layer. Every write (REST, controllers, the garbage
// collector) goes through it. It is safe for concurrent use.
type Service struct {
	store store.Store
	log   *slog.Logger
	reg   *kinds.Registry
	adm   atomic.Pointer[admitterBox]
	opts  Options

	// running is set while Run runs: its loop belongs to one run at a time.
	running atomic.Bool
	// watchDecode decodes each store event once for all watches.
	watchDecode *kinds.DecodeCache
	// initial shares the initial lists of watches that start together.
	initial initialLists
	// namespaces answers creates whether their namespace is active.
	namespaces namespaceCache
	// readRecordSaving serializes the saves of CRDs' read-schema records: a
	// save holds its one slot. A channel rather than a mutex, so that a save
	// waiting behind one stalled on the store gives up with its context.
	readRecordSaving chan struct{}
	// readSettle is how long after a schema change the revision of the
	// CRD's read schemas is stored (recordRead).
	readSettle time.Duration
	// delayed runs the delayed saves of read-schema records; Run stops it
	// when it returns, and Close for good.
	delayed delayedWork
	// listPageBytes is about how many bytes of objects ListJSONPages reads
	// at a time (listJSONPageBytes).
	listPageBytes int64
	// started is when New ran: a CRD deleted before then is unknown to the
	// registry (firstSchemas).
	started time.Time
}

type admitterBox struct{ a Admitter }

// New returns a Service on opts.Store: it serves the built-in kinds and every
// CRD already stored, and makes sure the system namespaces exist
// (systemNamespaces).
func New(ctx context.Context, opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: Options.Store is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxObjectBytes <= 0 {
		opts.MaxObjectBytes = DefaultMaxObjectBytes
	}
	s := &Service{
		store: opts.Store,
		log:   opts.Logger,
		reg:   kinds.NewRegistry(),
		opts:  opts,

		watchDecode:      kinds.NewDecodeCache(),
		readRecordSaving: make(chan struct{}, 1),
		readSettle:       defaultReadRecordSettle,
		listPageBytes:    listJSONPageBytes,
		started:          opts.Now(),
	}
	if opts.SharedStore {
		s.reg.SharedStore()
	}
	s.setAdmitter(opts.Admitter)
	if _, err := s.loadCRDs(ctx); err != nil {
		return nil, err
	}
	if err := s.createSystemNamespaces(ctx); err != nil {
		return nil, err
	}
	if err := s.upgradeNamespaces(ctx); err != nil {
		return nil, fmt.Errorf("engine: upgrade stored namespaces: %w", err)
	}
	return s, nil
}

// setAdmitter replaces the admission chain; nil removes it. Writes already
// past admission are not affected. The chain is Options.Admitter, given at
// construction; the package's tests swap it on a running Service.
func (s *Service) setAdmitter(a Admitter) {
	s.adm.Store(&admitterBox{a: a})
}

// Resources returns every served resource version, sorted by group, resource
// and version priority, as this server serves them now.
func (s *Service) Resources() []kinds.Resource { return s.reg.Resources() }

// CaughtUpResources is Resources after, on a shared store, catching up with
// the stored CRDs (catchUpCRDs: a read of their keys), so that discovery
// lists what another server just served. Discovery calls it; other callers
// call it on a miss in Resources.
func (s *Service) CaughtUpResources() []kinds.Resource {
	s.catchUpCRDs()
	return s.reg.Resources()
}

// Resource returns the served resource gvr, read through to the store when
// another server sharing it may have just created its CRD (readThroughCRD).
func (s *Service) Resource(gvr schema.GroupVersionResource) (kinds.Resource, bool) {
	sv, ok := s.reg.Get(gvr)
	if !ok {
		if sv, ok = s.readThroughCRD(gvr); !ok {
			return kinds.Resource{}, false
		}
	}
	return sv.Resource, true
}

// ResourceForKind returns the served resource of a kind.
func (s *Service) ResourceForKind(gvk schema.GroupVersionKind) (kinds.Resource, bool) {
	sv, ok := s.reg.ByKind(gvk)
	if !ok {
		return kinds.Resource{}, false
	}
	return sv.Resource, true
}

// CRDs returns the CustomResourceDefinitions being served.
func (s *Service) CRDs() []*apiextensionsv1.CustomResourceDefinition { return s.reg.CRDs() }

// Generation changes whenever the set of served resources changes, so that
// callers can cache documents derived from it (discovery, OpenAPI).
func (s *Service) Generation() int64 { return s.reg.Generation() }

// ConvertToTable renders obj (an object or a list) of gvr as a meta/v1 Table
// with the kind's printer columns.
func (s *Service) ConvertToTable(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	sv, ok := s.reg.Get(gvr)
	if !ok {
		return nil, notServed(gvr)
	}
	t, err := sv.ConvertToTable(ctx, obj, opts)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("table of %s: %w", gvr.Resource, err))
	}
	return t, nil
}

// lookup finds a served resource and checks the namespace against its scope.
// all allows an empty namespace for a namespaced resource (list and watch).
func (s *Service) lookup(gvr schema.GroupVersionResource, namespace string, all bool) (*kinds.Kind, error) {
	sv, ok := s.reg.Get(gvr)
	if !ok {
		if sv, ok = s.readThroughCRD(gvr); !ok {
			return nil, notServed(gvr)
		}
	}
	if !sv.Namespaced && namespace != "" {
		return nil, notServed(gvr)
	}
	if sv.Namespaced && namespace == "" && !all {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s is namespaced: a namespace is required", gvr.Resource))
	}
	return sv, nil
}

func key(sv *kinds.Kind, namespace, name string) string {
	gr := sv.StoredGroupResource()
	return store.ObjectKey(gr.Group, gr.Resource, namespace, name)
}

// parseRV parses a resourceVersion; "" and "0" give 0.
func parseRV(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
	}
	return n, nil
}

// notOlderThan waits for nothing: it checks that the store has reached rv.
func (s *Service) notOlderThan(ctx context.Context, rv int64) error {
	if rv == 0 {
		return nil
	}
	cur, err := s.store.CurrentRevision(ctx)
	if err != nil {
		return storeError(err, schema.GroupResource{}, "")
	}
	if cur < rv {
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
	}
	return nil
}

// CheckStore reports whether the store answers: what the server's health
// endpoints check.
func (s *Service) CheckStore(ctx context.Context) error {
	// A backend that can find damage in its data reports it here.
	if h, ok := s.store.(interface{ Health() error }); ok {
		if err := h.Health(); err != nil {
			return err
		}
	}
	_, err := s.store.CurrentRevision(ctx)
	return err
}

// Get returns one object.
func (s *Service) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	sv, err := s.lookup(gvr, namespace, false)
	if err != nil {
		return nil, err
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if err := s.notOlderThan(ctx, rv); err != nil {
		return nil, err
	}
	kv, err := s.store.Get(ctx, key(sv, namespace, name), store.GetOptions{})
	if err != nil {
		return nil, storeError(err, gvr.GroupResource(), name)
	}
	return sv.Decode(kv)
}
