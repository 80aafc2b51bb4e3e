package kinds

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
)

// ReadSchemas are the schemas a CRD's stored objects are read with.
//
// Kubernetes prunes and defaults every custom resource it reads from storage
// with the structural schema of the version the object is stored at, so a
// schema that gains a default, or drops a field, applies to the objects
// written before it changed (without writing them back). Setpoint does the
// same, but only where it can change something: an object written at or
// after revision Since was pruned and defaulted on its write with the
// schemas it would be read with, and is served as stored (which keeps the
// list fast path). How since is chosen, kept across restarts and raised by
// writes racing a change: Registry.SetCRD, WroteWith and ReadRecord.
type ReadSchemas struct {
	// fp fingerprints byVersion and preserveUnknown: equal fingerprints
	// read stored objects alike.
	fp string
	// since only grows: a write that used an older *Kind commits after
	// the registry took these schemas, and raises it past its revision.
	since atomic.Int64
	// byVersion holds the structural schema, defaults pruned as on writes,
	// of every version of the CRD that has one, served or not.
	byVersion       map[string]*structuralschema.Structural
	preserveUnknown bool
	// defaults are byVersion's defaultingSchema, made by seal.
	defaults map[string]*structuralschema.Structural
	// settled is set once no write can still hold the CRD's previous
	// schemas (a while after a change, see Settle): only then is the
	// revision stored, so that a crash while such a write is in flight restarts
	// from the conservative revision.
	settled atomic.Bool
	// whole is set when other servers share the store: they learn of a
	// schema change a moment later and may write with the previous schemas
	// meanwhile, at revisions past the change, so until settled every stored
	// object is read through these schemas, and settling raises since to the
	// store's revision of that moment.
	whole atomic.Bool
	// superseded is closed when the CRD's schemas change: watches opened
	// with these schemas end, as Kubernetes ends them when it rebuilds a
	// CRD's storage, and clients resume with the new ones.
	superseded chan struct{}
}

// newReadSchemas returns the read schemas of crd, given the structural
// schemas of its versions; since is set when the registry takes them.
// The map is filled by the caller before the fingerprint is taken (seal).
func newReadSchemas(crd *apiextensionsv1.CustomResourceDefinition, byVersion map[string]*structuralschema.Structural) *ReadSchemas {
	return &ReadSchemas{byVersion: byVersion, preserveUnknown: crd.Spec.PreserveUnknownFields, superseded: make(chan struct{})}
}

// seal takes the fingerprint of the finished schemas.
func (rs *ReadSchemas) seal() error {
	b, err := json.Marshal(struct {
		PreserveUnknown bool
		ByVersion       map[string]*structuralschema.Structural
	}{rs.preserveUnknown, rs.byVersion})
	if err != nil {
		return fmt.Errorf("fingerprint schemas: %w", err)
	}
	sum := sha256.Sum256(b)
	rs.fp = hex.EncodeToString(sum[:])
	rs.defaults = make(map[string]*structuralschema.Structural, len(rs.byVersion))
	for v, s := range rs.byVersion {
		rs.defaults[v] = defaultingSchema(s)
	}
	return nil
}

// sameSchemas reports whether a and b read stored objects alike.
func sameSchemas(a, b *ReadSchemas) bool { return a.fp == b.fp }

// ReadRecord is what the store keeps of a CRD's read schemas, so that a
// server that starts reads objects as stored since the same revision as
// the one that wrote them, instead of since the CRD's last write.
type ReadRecord struct {
	Since       int64  `json:"since"`
	Fingerprint string `json:"fingerprint"`
}

// Record returns what the store keeps of rs.
func (rs *ReadSchemas) Record() ReadRecord {
	return ReadRecord{Since: rs.since.Load(), Fingerprint: rs.fp}
}

// Since is the revision from which stored objects read as stored.
func (rs *ReadSchemas) Since() int64 { return rs.since.Load() }

// Fingerprint identifies the schemas: equal fingerprints read stored
// objects alike.
func (rs *ReadSchemas) Fingerprint() string { return rs.fp }

// Settled reports whether no write can still hold the CRD's previous
// schemas, so that their revision may be stored.
func (rs *ReadSchemas) Settled() bool { return rs.settled.Load() }

// Settle marks rs settled: writes that took the previous schemas, on this
// server or another sharing its store, are done; current is the store's
// revision now.
func (rs *ReadSchemas) Settle(current int64) {
	if rs.whole.Load() {
		rs.Raise(current + 1)
	}
	rs.settled.Store(true)
}

// Superseded is closed when the CRD's schemas change: watches opened with
// rs end, as Kubernetes ends them when it rebuilds a CRD's storage. It is
// nil for a nil rs (built-in kinds), which blocks forever.
func (rs *ReadSchemas) Superseded() <-chan struct{} {
	if rs == nil {
		return nil
	}
	return rs.superseded
}

// Stale reports whether an object stored at revision rev may read
// differently from how it was stored.
func (rs *ReadSchemas) Stale(rev int64) bool {
	return rs != nil && (rev < rs.since.Load() || rs.whole.Load() && !rs.settled.Load())
}

// Raise makes objects written before rev stale.
func (rs *ReadSchemas) Raise(rev int64) {
	for {
		cur := rs.since.Load()
		if rev <= cur || rs.since.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// apply prunes and defaults obj, a stored object of the kind served by sv,
// with the schema of the version it is stored at (sv's version when that
// version is no longer in the CRD), as Kubernetes' storage decoder does:
// unknown fields pruned unless the CRD preserves them, nulls the schema does
// not allow dropped, then defaults set.
func (rs *ReadSchemas) apply(sv *Kind, obj map[string]any) {
	av, _ := obj["apiVersion"].(string)
	if rs.schemaOf(av) == nil {
		av = sv.GVR.GroupVersion().String()
	}
	rs.applyVersion(av, obj)
}

// schemaOf returns the schema of apiVersion, a version of the CRD as
// group/version; nil when it has none.
func (rs *ReadSchemas) schemaOf(apiVersion string) *structuralschema.Structural {
	if _, version, ok := strings.Cut(apiVersion, "/"); ok {
		return rs.byVersion[version]
	}
	return nil
}

// versionOf is the version of apiVersion ("" without one).
func (rs *ReadSchemas) versionOf(apiVersion string) string {
	_, version, _ := strings.Cut(apiVersion, "/")
	return version
}

// applyVersion prunes and defaults obj with the schema of apiVersion, if it
// has one.
func (rs *ReadSchemas) applyVersion(apiVersion string, obj map[string]any) {
	if rs == nil {
		return
	}
	s := rs.schemaOf(apiVersion)
	if s == nil {
		return
	}
	if !rs.preserveUnknown {
		structuralpruning.Prune(obj, s, true)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
	}
	if d, ok := rs.defaults[rs.versionOf(apiVersion)]; ok {
		s = d // only the defaults: see defaultingSchema
	}
	structuraldefaulting.Default(obj, s)
}
