package engine

import (
	"reflect"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
)

// readSchemas are the schemas a CRD's stored objects are read with.
//
// Kubernetes prunes and defaults every custom resource it reads from storage
// with the structural schema of the version the object is stored at, so a
// schema that gains a default, or drops a field, applies to the objects
// written before it changed (without writing them back). Setpoint does the
// same, but only where it can change something: an object written at or
// after revision since was pruned and defaulted on its write with the
// schemas it would be read with, and is served as stored (which keeps the
// list fast path). since is the revision of the CRD write that changed the
// schemas; when a server starts, or first sees the CRD, it is the CRD's last
// write, which can only make more objects go through the read steps than
// need to, never fewer.
type readSchemas struct {
	// since only grows: a write that used an older *served commits after
	// the registry took these schemas, and raises it past its revision.
	since atomic.Int64
	// byVersion holds the structural schema, defaults pruned as on writes,
	// of every version of the CRD that has one, served or not.
	byVersion       map[string]*structuralschema.Structural
	preserveUnknown bool
}

// newReadSchemas returns the read schemas of crd, given the structural
// schemas of its versions; since is set when the registry takes them.
func newReadSchemas(crd *apiextensionsv1.CustomResourceDefinition, byVersion map[string]*structuralschema.Structural) *readSchemas {
	return &readSchemas{byVersion: byVersion, preserveUnknown: crd.Spec.PreserveUnknownFields}
}

// sameSchemas reports whether a and b read stored objects alike.
func sameSchemas(a, b *readSchemas) bool {
	return a.preserveUnknown == b.preserveUnknown && reflect.DeepEqual(a.byVersion, b.byVersion)
}

// stale reports whether an object stored at revision rev may read
// differently from how it was stored.
func (rs *readSchemas) stale(rev int64) bool {
	return rs != nil && rev < rs.since.Load()
}

// raise makes objects written before rev stale.
func (rs *readSchemas) raise(rev int64) {
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
func (rs *readSchemas) apply(sv *served, obj map[string]any) {
	s := rs.byVersion[sv.GVR.Version]
	if av, ok := obj["apiVersion"].(string); ok {
		if group, version, ok := strings.Cut(av, "/"); ok && group == sv.GVR.Group {
			if vs, ok := rs.byVersion[version]; ok {
				s = vs
			}
		}
	}
	rs.applySchema(s, obj)
}

// applyVersion prunes and defaults obj with the schema of apiVersion (a
// version of the CRD, as group/version), if it has one.
func (rs *readSchemas) applyVersion(apiVersion string, obj map[string]any) {
	if rs == nil {
		return
	}
	if _, version, ok := strings.Cut(apiVersion, "/"); ok {
		rs.applySchema(rs.byVersion[version], obj)
	}
}

func (rs *readSchemas) applySchema(s *structuralschema.Structural, obj map[string]any) {
	if s == nil {
		return
	}
	if !rs.preserveUnknown {
		structuralpruning.Prune(obj, s, true)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
	}
	structuraldefaulting.Default(obj, s)
}
