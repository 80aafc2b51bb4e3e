package kinds

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Resource describes one served resource at one version: what routing,
// discovery and kubectl need to know about it.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	ListKind   string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Status and Scale say which subresources the resource serves.
	Status bool
	Scale  bool
	// Builtin is true for the kinds Setpoint serves without a CRD.
	Builtin bool
	// CRD is the name of the CustomResourceDefinition that registered the
	// resource; empty for built-in kinds.
	CRD string
	// DeprecationWarning is the warning every request to a version the CRD
	// marks deprecated gets; empty when the version is not deprecated.
	DeprecationWarning string
	// StoredAs is the group/version of the kind the resource's objects
	// are stored as, when that is another one's (events.k8s.io/v1 Events
	// are core/v1 Events); empty otherwise.
	StoredAs schema.GroupVersion
}

// GVK returns the resource's kind at its version.
func (r Resource) GVK() schema.GroupVersionKind {
	return r.GVR.GroupVersion().WithKind(r.Kind)
}

// Strategy is the part of a Kubernetes REST strategy the engine calls. The
// custom resource strategies of k8s.io/apiextensions-apiserver implement it,
// and so do the strategies of the built-in kinds.
type Strategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// Kind is a served Resource with everything needed to serve it: its
// strategies, schemas, field managers and stored encoding.
type Kind struct {
	Resource
	strategy       Strategy
	statusStrategy Strategy
	// structural is the version's structural schema, nil when it has none.
	structural *structuralschema.Structural
	// defaults is the part of structural that defaulting needs
	// (defaultingSchema), when defaultsBuilt; else structural is used.
	defaults        *structuralschema.Structural
	defaultsBuilt   bool
	preserveUnknown bool
	table           rest.TableConvertor
	scale           *apiextensionsv1.CustomResourceSubresourceScale
	// strategicPatch is the typed object strategic merge patches are computed
	// against; nil when the kind only takes merge and JSON patches.
	strategicPatch any
	// fields are the top-level fields of a built-in kind; others are dropped
	// (and reported to fieldValidation), as typed decoding would.
	fields map[string]bool
	// typed finds the unknown fields of a built-in kind's objects at any
	// depth (unknownfields.go); nil for custom resources.
	typed *typedFields
	// noEmbedded is set when the structural schema was found to have no
	// x-kubernetes-embedded-resource: coercion has nothing to do there.
	noEmbedded bool
	// createValidation, when set, validates creates in place of
	// strategy.Validate (custom resources without a scale subresource).
	createValidation *createValidation
	// prefix is how documents encode stores at this version begin
	// (storedPrefix), nil in served values built by hand.
	prefix []byte
	// terminating is set when the kind's CRD is being deleted: its objects
	// are being deleted, and creates are refused.
	terminating bool
	// storage is the apiVersion objects of a custom resource are stored at
	// (the CRD's storage version); "" for built-in kinds, which have one.
	storage string
	// read are the schemas stored objects of a custom resource are read
	// with (readschema.go); nil for built-in kinds.
	read *ReadSchemas
	// managed are the kind's field managers (managedfields.go), built with
	// a CRD's kinds; those of a built-in kind are made on first use, under
	// builtinManaged.
	managed        *fieldManagers
	builtinManaged sync.Once
	// view, when set, makes the kind a view of another kind's stored
	// objects (eventsv1.go).
	view *storedView
	// encodedSize is the length of the last document Encode made that
	// changed it much (encodeBuffer): the size the next one starts at.
	encodedSize atomic.Int64
}

// Registry is the set of served resources. It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex // guards everything below
	// byGVR holds every served resource version.
	byGVR map[schema.GroupVersionResource]*Kind
	// crds holds the CRDs that registered resources, by name.
	crds map[string]*apiextensionsv1.CustomResourceDefinition
	// crdRev is the store revision of the last write applied per CRD name
	// (a delete leaves its revision), so that a late, older write never
	// replaces a newer one.
	crdRev map[string]int64
	// read holds the read schemas last registered per CRD name, whose
	// revision carries over to a write that leaves them unchanged.
	read map[string]*ReadSchemas
	// generation counts changes, so that callers can cache derived documents.
	generation int64
	// shared is set when other servers share the store (SharedStore).
	shared bool

	// fieldManagers holds the field managers last built for each CRD name
	// (*crdFieldManagersEntry), reused while the CRD's schemas are the same
	// (crdFieldManagers). It has a lock of its own.
	fieldManagers sync.Map
}

// NewRegistry returns a registry that serves the built-in kinds.
func NewRegistry() *Registry {
	r := &Registry{
		byGVR:  map[schema.GroupVersionResource]*Kind{},
		crds:   map[string]*apiextensionsv1.CustomResourceDefinition{},
		crdRev: map[string]int64{},
		read:   map[string]*ReadSchemas{},
	}
	r.add(builtins()...)
	return r
}

// SharedStore tells the registry that other servers write to its store:
// after a schema change (or a CRD loaded without a record of its schemas)
// objects are read through the schemas until the change settles, since
// another server may still write with the previous ones (ReadSchemas.Settle).
func (r *Registry) SharedStore() {
	r.mu.Lock()
	r.shared = true
	r.mu.Unlock()
}

// Get returns the kind served as gvr.
func (r *Registry) Get(gvr schema.GroupVersionResource) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.byGVR[gvr]
	return s, ok
}

// add serves kinds that no CRD registers.
func (r *Registry) add(ss ...*Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range ss {
		r.byGVR[s.GVR] = s
	}
	r.generation++
}

// SetCRD replaces the resources registered by the CRD named crd.Name, as
// stored at revision rev, unless a newer write was applied already. current
// returns the store's current revision.
//
// When the CRD's schemas change, every object written up to the store's
// current revision is read through the new ones: writes that took the old
// schemas before the switch and committed meanwhile are among them, and
// those that commit after it raise the revision themselves (WroteWith).
//
// A CRD new to this registry (created, or loaded at start) takes the
// revision of rec, the stored record, when it is of the same schemas; without
// one, everything stored so far is read through the schemas. SetCRD returns
// the read schemas whose revision is new, for the caller to record: at once
// when settled, or once writes that took the previous schemas are done (see
// ReadSchemas.Settle).
//
// On a shared store, other servers may still write with other schemas of a
// CRD new to this registry, so every object is read through its schemas
// until they settle, unless only one set of schemas of it can have been in
// use: the CRD's spec never changed (generation 1), no earlier incarnation
// of it was deleted while this registry watched, and first reports that the
// caller could not have missed one (see engine's firstSchemas).
func (r *Registry) SetCRD(crd *apiextensionsv1.CustomResourceDefinition, ss []*Kind, rev int64, rec *ReadRecord, first bool, current func() int64) *ReadSchemas {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev < r.crdRev[crd.Name] {
		return nil
	}
	_, seenBefore := r.crdRev[crd.Name]
	r.crdRev[crd.Name] = rev
	var changed *ReadSchemas
	if len(ss) > 0 && ss[0].read != nil {
		rs := ss[0].read
		switch prev := r.read[crd.Name]; {
		case prev == nil && rec != nil && rec.Fingerprint == rs.fp:
			rs.since.Store(rec.Since)
			rs.settled.Store(true)
		case prev == nil:
			// Created, or loaded without a record of these schemas: no
			// write of this server's can hold other schemas of it.
			rs.since.Store(max(rev, current()+1))
			whole := r.shared && !(first && crd.Generation == 1 && !seenBefore)
			rs.whole.Store(whole)
			rs.settled.Store(!whole)
			changed = rs
		case sameSchemas(prev, rs):
			rs.since.Store(prev.since.Load())
			rs.whole.Store(prev.whole.Load())
			rs.settled.Store(prev.settled.Load())
			rs.superseded = prev.superseded
		default:
			rs.since.Store(max(rev, current()+1))
			rs.whole.Store(r.shared)
			close(prev.superseded)
			changed = rs
		}
		r.read[crd.Name] = rs
	}
	r.removeLocked(crd.Name)
	r.crds[crd.Name] = crd
	for _, s := range ss {
		r.byGVR[s.GVR] = s
	}
	r.generation++
	return changed
}

// HasRead reports whether the registry holds read schemas of the CRD name.
func (r *Registry) HasRead(name string) bool { return r.ReadOf(name) != nil }

// ReadOf returns the read schemas of the CRD name, nil when it has none.
func (r *Registry) ReadOf(name string) *ReadSchemas {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.read[name]
}

// WroteWith notes that an object of sv's kind was written at revision rev
// with sv's read schemas: when the CRD has other schemas by now (the write
// took sv before a CRD change and committed after it), objects written up to
// rev are read through the current ones.
// It returns the current read schemas when it raised their revision, for the
// caller to record.
func (r *Registry) WroteWith(sv *Kind, rev int64) *ReadSchemas {
	if sv.read == nil {
		return nil
	}
	select {
	case <-sv.read.superseded: // the schemas changed since sv was taken
	default:
		return nil // the common case, every write: no lock
	}
	r.mu.RLock()
	cur := r.read[sv.CRD]
	r.mu.RUnlock()
	if cur != nil && cur != sv.read && !sameSchemas(cur, sv.read) {
		cur.Raise(rev + 1)
		return cur
	}
	return nil
}

// RemoveCRD stops serving the resources registered by the CRD name, deleted
// (or found unservable) at revision rev; rev 0 removes unconditionally.
func (r *Registry) RemoveCRD(name string, rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev != 0 {
		if rev < r.crdRev[name] {
			return
		}
		r.crdRev[name] = rev
	}
	delete(r.read, name)
	r.fieldManagers.Delete(name)
	r.removeLocked(name)
	r.generation++
}

func (r *Registry) removeLocked(name string) {
	delete(r.crds, name)
	for gvr, s := range r.byGVR {
		if s.CRD == name {
			delete(r.byGVR, gvr)
		}
	}
}

// Resources returns every served resource, sorted by group, resource and
// version priority (the preferred version first within a resource).
func (r *Registry) Resources() []Resource {
	r.mu.RLock()
	out := make([]Resource, 0, len(r.byGVR))
	for _, s := range r.byGVR {
		out = append(out, s.Resource)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GVR, out[j].GVR
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return version.CompareKubeAwareVersionStrings(a.Version, b.Version) > 0
	})
	return out
}

// ByKind finds the served resource of a group/version/kind.
func (r *Registry) ByKind(gvk schema.GroupVersionKind) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.byGVR {
		if s.GVR.Group == gvk.Group && s.GVR.Version == gvk.Version && s.Kind == gvk.Kind {
			return s, true
		}
	}
	return nil, false
}

// GroupResources returns one served version of every group/resource: what a
// sweep over all stored objects walks. Views of another kind's objects
// (events.k8s.io/v1 Events) are left out: their objects are that kind's.
func (r *Registry) GroupResources() []*Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	seen := map[schema.GroupResource]bool{}
	var out []*Kind
	for _, s := range r.byGVR {
		gr := s.GVR.GroupResource()
		if !seen[gr] && s.view == nil {
			seen[gr] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GVR.String() < out[j].GVR.String() })
	return out
}

// Generation changes whenever the set of served kinds changes, so that
// callers can cache what they derive from it.
func (r *Registry) Generation() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.generation
}

// CRDRevision is the store revision of the CRD name the registry last
// served or removed; 0 when it has seen none.
func (r *Registry) CRDRevision(name string) int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.crdRev[name]
}

// CRDs returns the CRDs whose kinds are served, by name.
func (r *Registry) CRDs() []*apiextensionsv1.CustomResourceDefinition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(r.crds))
	for _, c := range r.crds {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ByGroupResource returns the served version of gr that a sweep over all
// stored objects walks (the first by GroupVersionResource string, as
// GroupResources orders them), nil when gr is not served.
func (r *Registry) ByGroupResource(gr schema.GroupResource) *Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out *Kind
	for gvr, sv := range r.byGVR {
		if gvr.GroupResource() == gr && sv.view == nil && (out == nil || gvr.String() < out.GVR.String()) {
			out = sv
		}
	}
	return out
}

// ServesCRD reports whether the registry serves a resource of the CRD name.
func (r *Registry) ServesCRD(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sv := range r.byGVR {
		if sv.CRD == name {
			return true
		}
	}
	return false
}

// ReadSchemas returns the schemas stored objects of k are read with; nil
// for built-in kinds.
func (k *Kind) ReadSchemas() *ReadSchemas { return k.read }
