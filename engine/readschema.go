package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"

	"github.com/setpoint-dev/setpoint/store"
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
// list fast path). How since is chosen, kept across restarts and raised by
// writes racing a change: registry.setCRD, wroteWith and readRecord.
type readSchemas struct {
	// fp fingerprints byVersion and preserveUnknown: equal fingerprints
	// read stored objects alike.
	fp string
	// since only grows: a write that used an older *served commits after
	// the registry took these schemas, and raises it past its revision.
	since atomic.Int64
	// byVersion holds the structural schema, defaults pruned as on writes,
	// of every version of the CRD that has one, served or not.
	byVersion       map[string]*structuralschema.Structural
	preserveUnknown bool
	// defaults are byVersion's defaultingSchema, made by seal.
	defaults map[string]*structuralschema.Structural
	// settled is set once no write can still hold the CRD's previous
	// schemas (readRecordSettle after a change): only then is the revision
	// stored, so that a crash while such a write is in flight restarts
	// from the conservative revision.
	settled atomic.Bool
	// superseded is closed when the CRD's schemas change: watches opened
	// with these schemas end, as Kubernetes ends them when it rebuilds a
	// CRD's storage, and clients resume with the new ones.
	superseded chan struct{}
}

// readRecordSettle is how long after a schema change the revision is
// stored: longer than a write that took the previous schemas can take to
// commit (admission calls included). A write that commits later still raises
// the revision, in memory and in the record.
var readRecordSettle = 2 * time.Minute

// newReadSchemas returns the read schemas of crd, given the structural
// schemas of its versions; since is set when the registry takes them.
// The map is filled by the caller before the fingerprint is taken (seal).
func newReadSchemas(crd *apiextensionsv1.CustomResourceDefinition, byVersion map[string]*structuralschema.Structural) *readSchemas {
	return &readSchemas{byVersion: byVersion, preserveUnknown: crd.Spec.PreserveUnknownFields, superseded: make(chan struct{})}
}

// seal takes the fingerprint of the finished schemas.
func (rs *readSchemas) seal() error {
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
func sameSchemas(a, b *readSchemas) bool { return a.fp == b.fp }

// readRecord is what the store keeps of a CRD's read schemas, so that a
// server that starts reads objects as stored since the same revision as
// the one that wrote them, instead of since the CRD's last write.
type readRecord struct {
	Since       int64  `json:"since"`
	Fingerprint string `json:"fingerprint"`
}

// readRecordPrefix holds the records among the server's private keys.
const readRecordPrefix = store.PrivatePrefix + "crdreadschemas/"

func readRecordKey(crd string) string { return readRecordPrefix + crd }

// loadReadRecord returns the stored record of crd, nil when there is none
// or it cannot be read (the caller then takes the conservative revision).
func (s *Service) loadReadRecord(ctx context.Context, crd string) *readRecord {
	kv, err := s.store.Get(ctx, readRecordKey(crd), store.GetOptions{})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("read the CRD's read-schema record", "crd", crd, "err", err)
		}
		return nil
	}
	var rec readRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		s.log.Warn("decode the CRD's read-schema record", "crd", crd, "err", err)
		return nil
	}
	return &rec
}

// saveReadRecord stores rs's revision and fingerprint for crd, unless the
// record already says as much; concurrent saves keep the larger revision of
// the same fingerprint.
func (s *Service) saveReadRecord(ctx context.Context, crd string, rs *readSchemas) {
	s.readRecordMu.Lock()
	defer s.readRecordMu.Unlock()
	want := readRecord{Since: rs.since.Load(), Fingerprint: rs.fp}
	for attempt := 0; attempt < 5; attempt++ {
		kv, err := s.store.Get(ctx, readRecordKey(crd), store.GetOptions{})
		var cur readRecord
		switch {
		case errors.Is(err, store.ErrNotFound):
			kv = nil
		case err != nil:
			s.log.Warn("read the CRD's read-schema record", "crd", crd, "err", err)
			return
		default:
			if json.Unmarshal(kv.Value, &cur) == nil && cur.Fingerprint == want.Fingerprint && cur.Since >= want.Since {
				return
			}
		}
		b, _ := json.Marshal(want)
		if kv == nil {
			_, err = s.store.Create(ctx, readRecordKey(crd), b)
		} else {
			_, err = s.store.Update(ctx, readRecordKey(crd), b, kv.ModRevision)
		}
		if err == nil || !(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists)) {
			if err != nil {
				s.log.Warn("store the CRD's read-schema record", "crd", crd, "err", err)
			}
			return
		}
	}
}

// dropReadRecord removes crd's record once the CRD is gone.
func (s *Service) dropReadRecord(ctx context.Context, crd string) {
	if _, _, err := s.store.Delete(ctx, readRecordKey(crd), 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("remove the CRD's read-schema record", "crd", crd, "err", err)
	}
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
	av, _ := obj["apiVersion"].(string)
	if rs.schemaOf(av) == nil {
		av = sv.GVR.GroupVersion().String()
	}
	rs.applyVersion(av, obj)
}

// schemaOf returns the schema of apiVersion, a version of the CRD as
// group/version; nil when it has none.
func (rs *readSchemas) schemaOf(apiVersion string) *structuralschema.Structural {
	if _, version, ok := strings.Cut(apiVersion, "/"); ok {
		return rs.byVersion[version]
	}
	return nil
}

// versionOf is the version of apiVersion ("" without one).
func (rs *readSchemas) versionOf(apiVersion string) string {
	_, version, _ := strings.Cut(apiVersion, "/")
	return version
}

// applyVersion prunes and defaults obj with the schema of apiVersion, if it
// has one.
func (rs *readSchemas) applyVersion(apiVersion string, obj map[string]any) {
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

// noteWrite records that an object of sv's kind was written at rev with sv's
// read schemas (registry.wroteWith), and stores a raised revision.
func (s *Service) noteWrite(ctx context.Context, sv *served, rev int64) {
	if rs := s.reg.wroteWith(sv, rev); rs != nil && rs.settled.Load() {
		s.saveReadRecord(context.WithoutCancel(ctx), sv.CRD, rs)
	}
}

// recordRead stores the revision of the CRD's new read schemas rs: at once
// when settled, else after readRecordSettle, if they are still the CRD's.
func (s *Service) recordRead(crd string, rs *readSchemas) {
	if rs.settled.Load() {
		s.saveReadRecord(context.Background(), crd, rs)
		return
	}
	time.AfterFunc(readRecordSettle, func() {
		cur := s.reg.readOf(crd)
		if cur == nil || cur.fp != rs.fp {
			return // changed again, or gone: the newer change records itself
		}
		cur.settled.Store(true)
		s.saveReadRecord(context.Background(), crd, cur)
	})
}
