package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// crdHooks keeps the registry in step with CRD writes.
type crdHooks struct{}

// prepare sets the CRD's defaults and server-owned status.
func (crdHooks) prepare(_ context.Context, s *Service, _ string, obj, _ map[string]any) error {
	return s.reg.PrepareCRD(obj)
}

// committed serves (or stops serving) the CRD a write committed. Its store
// calls (the read-schema record) outlive the client's request, which may go
// away once the write is durable, but are bounded by crdReadTimeout, so that
// a stalled store does not hold the write's answer as long as it stalls: a
// record not read counts as absent, one not saved keeps the earlier,
// conservative revision.
func (crdHooks) committed(ctx context.Context, s *Service, obj, old map[string]any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), crdReadTimeout)
	defer cancel()
	if obj == nil {
		u := &unstructured.Unstructured{Object: old}
		s.reg.RemoveCRD(u.GetName(), revisionOf(u))
		s.dropReadRecord(ctx, u.GetName())
		return
	}
	s.serveCRD(ctx, obj, revisionOf(&unstructured.Unstructured{Object: obj}))
}

// deleting lets a CRD go: DeleteObject gives it the cleanup finalizer, and
// the garbage collector deletes its objects before removing the finalizer.
func (crdHooks) deleting(context.Context, *Service, map[string]any, bool) error {
	return nil
}

// serveCRD registers the resources of a CRD stored at revision rev, when its
// names were accepted. A CRD being deleted stays served, terminating, until
// its objects are gone. A CRD that cannot be built is logged and not served.
// ctx bounds its store calls (the CRD's read-schema record): Run's CRD
// follower passes its own, so that a stalled store cannot hold Run up after
// it ends; a record not read is taken as absent (the conservative revision),
// one not saved keeps the earlier one.
func (s *Service) serveCRD(ctx context.Context, obj map[string]any, rev int64) {
	crd, err := kinds.CRDFromMap(obj)
	if err != nil {
		s.log.Error("decode stored CustomResourceDefinition", "err", err)
		return
	}
	if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		s.reg.RemoveCRD(crd.Name, rev)
		return
	}
	ss, err := s.reg.BuildCRD(crd)
	if err != nil {
		s.log.Error("serve CustomResourceDefinition", "crd", crd.Name, "err", err)
		s.reg.RemoveCRD(crd.Name, rev)
		return
	}
	var rec *kinds.ReadRecord
	if !s.reg.HasRead(crd.Name) {
		rec = s.loadReadRecord(ctx, crd.Name)
	}
	if rs := s.reg.SetCRD(crd, ss, rev, rec, s.firstSchemas(), func() int64 {
		cur, _ := s.store.CurrentRevision(ctx)
		return cur
	}); rs != nil {
		s.recordRead(ctx, crd.Name, rs)
	}
}

// firstSchemas reports whether the registry can have missed no earlier
// incarnation of a CRD it has not served before (kinds.Registry.SetCRD): one
// deleted before this Service started is unknown to it, and another server
// may still write with that incarnation's schemas until its deletion
// settles (readSettle), as for a schema change. Past that window, the
// registry knows of every deletion whose writers may not have settled.
func (s *Service) firstSchemas() bool {
	return s.opts.Now().Sub(s.started) >= s.readSettle
}

// crdReadTimeout bounds readThroughCRD's reads of the store (the CRD, and
// its read-schema record when it serves it) and the commit hook's calls for
// the read-schema record.
const crdReadTimeout = 2 * time.Second

// readThroughCRD serves the kind gvr names at once when the store holds a
// newer CRD for it than the registry has seen: a replica that shares its
// store with others learns of their CRD writes through a watch, a moment
// after they are made, and a client that created a CRD through one replica
// and uses it through another must not meet a 404 meanwhile. A server alone
// on its store (no Options.SharedStore) has seen every CRD write already,
// through its own write path, so a resource it does not serve costs it no
// store read.
func (s *Service) readThroughCRD(gvr schema.GroupVersionResource) (*kinds.Kind, bool) {
	if !s.opts.SharedStore || gvr.Group == "" || gvr.Resource == "" {
		return nil, false
	}
	name := gvr.Resource + "." + gvr.Group
	ctx, cancel := context.WithTimeout(context.Background(), crdReadTimeout)
	defer cancel()
	kv, err := s.store.Get(ctx, store.ObjectKey(kinds.CRDResource.Group, kinds.CRDResource.Resource, "", name), store.GetOptions{})
	if err == nil && kv.ModRevision > s.reg.CRDRevision(name) {
		if u, err := kinds.DecodeMap(kv.Value); err == nil {
			s.serveCRD(ctx, u, kv.ModRevision)
		}
	}
	// Whatever the read found, the registry is asked again: the CRD
	// follower may have served the CRD while the store was read (the
	// registry then has the revision read, or a newer one, and the
	// caller's miss is out of date).
	return s.reg.Get(gvr)
}

// catchUpCRDs brings the registry up to the CRDs stored now, when other
// servers share the store: it serves each CRD stored at a newer revision
// than the registry has seen, and stops serving those no longer stored, as
// the CRD follower will once its watch delivers their events. Discovery
// calls it (through Resources), so that a client that created a CRD
// through another replica, its answer already Established, finds the
// CRD's resources in this replica's discovery as readThroughCRD finds
// them for its requests. It reads the CRDs' keys and revisions, and only
// the CRDs that changed; a store that fails the read leaves the registry
// as it is.
func (s *Service) catchUpCRDs() {
	if !s.opts.SharedStore {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), crdReadTimeout)
	defer cancel()
	stored := map[string]bool{}
	var newer []string
	rev, err := store.ListPages(ctx, s.store, crdPrefix, store.ListOptions{KeysOnly: true, Limit: 500}, func(items []store.KeyValue) error {
		for _, kv := range items {
			name := strings.TrimPrefix(kv.Key, crdPrefix)
			stored[name] = true
			if kv.ModRevision > s.reg.CRDRevision(name) {
				newer = append(newer, name)
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	for _, name := range newer {
		kv, err := s.store.Get(ctx, crdPrefix+name, store.GetOptions{})
		if err != nil || kv.ModRevision <= s.reg.CRDRevision(name) {
			continue
		}
		if u, err := kinds.DecodeMap(kv.Value); err == nil {
			s.serveCRD(ctx, u, kv.ModRevision)
		}
	}
	for _, c := range s.reg.CRDs() {
		if !stored[c.Name] {
			s.reg.RemoveCRD(c.Name, rev)
		}
	}
}

// revisionOf is the store revision an object's resourceVersion names.
func revisionOf(u *unstructured.Unstructured) int64 {
	rev, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return rev
}
