package gc

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// The ownership graph is the garbage collector's in-memory index of every
// stored object: per object only what collection decides on (uid, resource,
// namespace, name, owner references, the finalizers the collector acts on
// and whether a deletion is pending). It is built from a list of every served
// resource at one revision and kept current by a watch of the whole keyspace
// from that revision, as an informer is. Nothing of it is persisted.

// gcResource is an interned group/resource.
type gcResource struct{ gr schema.GroupResource }

// gcKind is an interned apiVersion/kind of an owner reference.
type gcKind struct{ apiVersion, kind string }

type gcOwner struct {
	uid   types.UID
	kind  *gcKind
	name  string
	block bool // blockOwnerDeletion
}

// Node flags.
const (
	gcDeleting      uint8 = 1 << iota // has a deletionTimestamp
	gcOrphanFin                       // finalizer orphan
	gcForegroundFin                   // finalizer foregroundDeletion
	gcNamespaceFin                    // a terminating namespace (finalizer kubernetes)
	gcCRDCleanupFin                   // finalizer customresourcecleanup (a terminating CRD)
	gcAnyFin                          // any finalizer at all
)

// gcActing are the finalizers that make a deleting object the collector's work.
const gcActing = gcOrphanFin | gcForegroundFin | gcNamespaceFin | gcCRDCleanupFin

type gcNode struct {
	uid       types.UID
	res       *gcResource
	namespace string // interned
	name      string
	owners    []gcOwner
	flags     uint8
}

func (n *gcNode) deleting() bool { return n.flags&gcDeleting != 0 }

// stranded tells whether the node is deleting with no finalizer left: its
// deletion was cut short between the write that removed the last finalizer
// and the delete that follows it (finishDeletion completes it).
func (n *gcNode) stranded() bool { return n.deleting() && n.flags&gcAnyFin == 0 }

// acting tells whether the node is deleting with a finalizer the collector
// removes (orphan, foregroundDeletion, a namespace's or a CRD's).
func (n *gcNode) acting() bool { return n.deleting() && n.flags&gcActing != 0 }

// gcGraph is the index. It is not safe for concurrent use: the collector
// guards it.
type gcGraph struct {
	nodes map[types.UID]*gcNode
	// dependents holds, per owner uid (whether or not the owner is in nodes),
	// the nodes whose owner references name it.
	dependents map[types.UID]map[*gcNode]struct{}
	// namespaces and crds are the nodes of Namespaces and CRDs by name.
	namespaces map[string]*gcNode
	crds       map[string]*gcNode

	resources map[schema.GroupResource]*gcResource
	kinds     map[gcKind]*gcKind
	strs      map[string]string
}

func newGCGraph() *gcGraph {
	return &gcGraph{
		nodes:      map[types.UID]*gcNode{},
		dependents: map[types.UID]map[*gcNode]struct{}{},
		namespaces: map[string]*gcNode{},
		crds:       map[string]*gcNode{},
		resources:  map[schema.GroupResource]*gcResource{},
		kinds:      map[gcKind]*gcKind{},
		strs:       map[string]string{},
	}
}

func (g *gcGraph) intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := g.strs[s]; ok {
		return v
	}
	g.strs[s] = s
	return s
}

func (g *gcGraph) resource(gr schema.GroupResource) *gcResource {
	r := g.resources[gr]
	if r == nil {
		r = &gcResource{gr: gr}
		g.resources[gr] = r
	}
	return r
}

// grFromKey parses the group/resource of a key built by store.ObjectKey.
func grFromKey(key string) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(key, "/")
	if !ok {
		return schema.GroupResource{}, false
	}
	group, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return schema.GroupResource{}, false
	}
	resource, _, ok := strings.Cut(rest, "/")
	if !ok {
		return schema.GroupResource{}, false
	}
	if group == store.CoreGroup {
		group = ""
	}
	return schema.GroupResource{Group: group, Resource: resource}, true
}

// node builds the node of an object from its metadata, interning what
// objects share.
func (g *gcGraph) node(gr schema.GroupResource, m *engine.StoredMeta) *gcNode {
	n := &gcNode{uid: m.UID, res: g.resource(gr), namespace: g.intern(m.Namespace), name: m.Name}
	if len(m.OwnerReferences) > 0 {
		n.owners = make([]gcOwner, len(m.OwnerReferences))
		for i, r := range m.OwnerReferences {
			k := gcKind{apiVersion: r.APIVersion, kind: r.Kind}
			kp := g.kinds[k]
			if kp == nil {
				kp = &k
				g.kinds[k] = kp
			}
			n.owners[i] = gcOwner{uid: r.UID, kind: kp, name: r.Name, block: r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion}
		}
	}
	if m.Deleting() {
		n.flags |= gcDeleting
		if gr == kinds.NamespaceResource.GroupResource() {
			// Held by kubernetes in spec.finalizers, which metadata does
			// not show: the collector's to empty (see emptyNamespace).
			n.flags |= gcNamespaceFin
		}
	}
	if len(m.Finalizers) > 0 {
		n.flags |= gcAnyFin
	}
	for _, f := range m.Finalizers {
		switch f {
		case metav1.FinalizerOrphanDependents:
			n.flags |= gcOrphanFin
		case metav1.FinalizerDeleteDependents:
			n.flags |= gcForegroundFin
		case kinds.NamespaceFinalizer:
			n.flags |= gcNamespaceFin
		case apiextensionsv1.CustomResourceCleanupFinalizer:
			n.flags |= gcCRDCleanupFin
		}
	}
	return n
}

// put stores n, replacing the node of the same uid, and returns the node it
// replaced (nil when there was none).
func (g *gcGraph) put(n *gcNode) *gcNode {
	old := g.nodes[n.uid]
	if old != nil {
		g.unlink(old)
	}
	g.nodes[n.uid] = n
	for _, o := range n.owners {
		d := g.dependents[o.uid]
		if d == nil {
			d = map[*gcNode]struct{}{}
			g.dependents[o.uid] = d
		}
		d[n] = struct{}{}
	}
	switch n.res.gr {
	case kinds.NamespaceResource.GroupResource():
		g.namespaces[n.name] = n
	case kinds.CRDResource.GroupResource():
		g.crds[n.name] = n
	}
	return old
}

// remove drops the node of uid and returns it (nil when there was none).
func (g *gcGraph) remove(uid types.UID) *gcNode {
	n := g.nodes[uid]
	if n != nil {
		g.unlink(n)
		delete(g.nodes, uid)
	}
	return n
}

func (g *gcGraph) unlink(n *gcNode) {
	for _, o := range n.owners {
		if d := g.dependents[o.uid]; d != nil {
			delete(d, n)
			if len(d) == 0 {
				delete(g.dependents, o.uid)
			}
		}
	}
	switch n.res.gr {
	case kinds.NamespaceResource.GroupResource():
		if g.namespaces[n.name] == n {
			delete(g.namespaces, n.name)
		}
	case kinds.CRDResource.GroupResource():
		if g.crds[n.name] == n {
			delete(g.crds, n.name)
		}
	}
}

// ownersMissing tells whether an owner of n is not in the graph.
func (g *gcGraph) ownersMissing(n *gcNode) bool {
	for _, o := range n.owners {
		if g.nodes[o.uid] == nil {
			return true
		}
	}
	return false
}

func sameOwners(a, b []gcOwner) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].uid != b[i].uid || a[i].block != b[i].block {
			return false
		}
	}
	return true
}
