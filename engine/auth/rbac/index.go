package rbac

import (
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// subjectKey names who a binding grants to: a user name (a ServiceAccount
// subject is indexed under its user name) or a group.
type subjectKey struct {
	group bool
	name  string
}

// nsSubject is a subject within one namespace, for RoleBindings.
type nsSubject struct {
	ns string
	subjectKey
}

// grant is one subject of one binding.
type grant struct {
	kind    string // "ClusterRoleBinding" or "RoleBinding"
	ns      string // the RoleBinding's namespace
	name    string // the binding's name
	roleRef rbacv1.RoleRef
	subject rbacv1.Subject
}

// index holds the RBAC objects, indexed by subject so that a decision is a
// few map lookups. Its maps are changed only by the informers' handlers,
// under mu.
type index struct {
	mu           sync.RWMutex
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[string]*rbacv1.Role // by namespace/name
	// crbs and rbs are the grants of each binding, by binding name (and
	// namespace/name), so that an update or delete removes the old ones.
	crbs map[string][]grant
	rbs  map[string][]grant
	// crbBySubject and rbBySubject are the grants of each subject, keyed
	// by binding: pointers into crbs and rbs, which a decision reads
	// without copying them.
	crbBySubject map[subjectKey]map[string]*grant
	rbBySubject  map[nsSubject]map[string]*grant
}

func newIndex() *index {
	return &index{
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		roles:        map[string]*rbacv1.Role{},
		crbs:         map[string][]grant{},
		rbs:          map[string][]grant{},
		crbBySubject: map[subjectKey]map[string]*grant{},
		rbBySubject:  map[nsSubject]map[string]*grant{},
	}
}

// keyOf is the subject's key; ok is false for a subject that matches no
// one (a ServiceAccount without namespace in a ClusterRoleBinding, an
// unknown kind).
func keyOf(s rbacv1.Subject, bindingNS string) (subjectKey, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return subjectKey{name: s.Name}, true
	case rbacv1.GroupKind:
		return subjectKey{group: true, name: s.Name}, true
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS // a RoleBinding's own namespace
		}
		if ns == "" {
			return subjectKey{}, false
		}
		return subjectKey{name: serviceaccount.MakeUsername(ns, s.Name)}, true
	}
	return subjectKey{}, false
}

func (x *index) putClusterRole(r *rbacv1.ClusterRole) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clusterRoles[r.Name] = r
}

func (x *index) deleteClusterRole(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.clusterRoles, name)
}

func (x *index) putRole(r *rbacv1.Role) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.roles[r.Namespace+"/"+r.Name] = r
}

func (x *index) deleteRole(ns, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.roles, ns+"/"+name)
}

func (x *index) putClusterRoleBinding(b *rbacv1.ClusterRoleBinding) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropClusterRoleBindingLocked(b.Name)
	gs := make([]grant, 0, len(b.Subjects))
	var keys []subjectKey
	for _, s := range b.Subjects {
		k, ok := keyOf(s, "")
		if !ok {
			continue
		}
		gs = append(gs, grant{kind: "ClusterRoleBinding", name: b.Name, roleRef: b.RoleRef, subject: s})
		keys = append(keys, k)
	}
	for i, k := range keys {
		m := x.crbBySubject[k]
		if m == nil {
			m = map[string]*grant{}
			x.crbBySubject[k] = m
		}
		m[b.Name] = &gs[i]
	}
	x.crbs[b.Name] = gs
}

func (x *index) deleteClusterRoleBinding(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropClusterRoleBindingLocked(name)
}

func (x *index) dropClusterRoleBindingLocked(name string) {
	for _, g := range x.crbs[name] {
		k, _ := keyOf(g.subject, "")
		if m := x.crbBySubject[k]; m != nil {
			delete(m, name)
			if len(m) == 0 {
				delete(x.crbBySubject, k)
			}
		}
	}
	delete(x.crbs, name)
}

func (x *index) putRoleBinding(b *rbacv1.RoleBinding) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key := b.Namespace + "/" + b.Name
	x.dropRoleBindingLocked(key)
	gs := make([]grant, 0, len(b.Subjects))
	var keys []nsSubject
	for _, s := range b.Subjects {
		k, ok := keyOf(s, b.Namespace)
		if !ok {
			continue
		}
		gs = append(gs, grant{kind: "RoleBinding", ns: b.Namespace, name: b.Name, roleRef: b.RoleRef, subject: s})
		keys = append(keys, nsSubject{ns: b.Namespace, subjectKey: k})
	}
	for i, nk := range keys {
		m := x.rbBySubject[nk]
		if m == nil {
			m = map[string]*grant{}
			x.rbBySubject[nk] = m
		}
		m[key] = &gs[i]
	}
	x.rbs[key] = gs
}

func (x *index) deleteRoleBinding(ns, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropRoleBindingLocked(ns + "/" + name)
}

func (x *index) dropRoleBindingLocked(key string) {
	for _, g := range x.rbs[key] {
		k, _ := keyOf(g.subject, g.ns)
		nk := nsSubject{ns: g.ns, subjectKey: k}
		if m := x.rbBySubject[nk]; m != nil {
			delete(m, key)
			if len(m) == 0 {
				delete(x.rbBySubject, nk)
			}
		}
	}
	delete(x.rbs, key)
}

// rulesOfLocked returns the rules of the role a grant refers to; ok is false
// when that role does not exist.
func (x *index) rulesOfLocked(ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, bool) {
	switch ref.Kind {
	case "ClusterRole":
		r, ok := x.clusterRoles[ref.Name]
		if !ok {
			return nil, false
		}
		return r.Rules, true
	case "Role":
		r, ok := x.roles[ns+"/"+ref.Name]
		if !ok {
			return nil, false
		}
		return r.Rules, true
	}
	return nil, false
}

// visitLocked calls fn with each grant that applies to the user with name
// and groups in namespace ns (cluster-wide ones first), and the rules of
// its role (nil when the role is missing), until fn returns false. A grant
// may be visited more than once when it names the user in several ways.
func (x *index) visitLocked(name string, groups []string, ns string, fn func(g *grant, rules []rbacv1.PolicyRule, found bool) bool) {
	visit := func(m map[string]*grant) bool {
		for _, g := range m {
			rules, found := x.rulesOfLocked(g.roleRef, g.ns)
			if !fn(g, rules, found) {
				return false
			}
		}
		return true
	}
	if !visit(x.crbBySubject[subjectKey{name: name}]) {
		return
	}
	for _, grp := range groups {
		if !visit(x.crbBySubject[subjectKey{group: true, name: grp}]) {
			return
		}
	}
	if ns == "" {
		return
	}
	if !visit(x.rbBySubject[nsSubject{ns: ns, subjectKey: subjectKey{name: name}}]) {
		return
	}
	for _, grp := range groups {
		if !visit(x.rbBySubject[nsSubject{ns: ns, subjectKey: subjectKey{group: true, name: grp}}]) {
			return
		}
	}
}
