package apiserver

import (
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// aggregatedType is the media type of aggregated discovery documents.
const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

var (
	objectVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subVerbs    = metav1.Verbs{"get", "patch", "update"}
)

// namespaceVerbs are the verbs of namespaces: as in Kubernetes, they cannot
// be deleted as a collection.
var namespaceVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

// customVerbs are the verbs of a custom resource, in the order
// kube-apiserver's apiextensions discovery lists them (a built-in kind's
// are sorted).
var customVerbs = metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

// discoveryVerbs returns the verbs discovery lists for res.
func discoveryVerbs(res kinds.Resource) metav1.Verbs {
	switch {
	case res.GVR == kinds.NamespaceResource:
		return namespaceVerbs
	case isCustom(res):
		return customVerbs
	}
	return verbsOf(res)
}

// isCustom tells whether res is a custom resource as kube-apiserver would
// serve it: registered by a CRD, in a group that is not one of Kubernetes'
// own. The server's own CRDs for kinds Kubernetes builds in (Leases) are
// listed as Kubernetes lists those kinds.
func isCustom(res kinds.Resource) bool {
	return !res.Builtin && !isReview(res.GVR) && !scheme.Scheme.IsGroupRegistered(res.GVR.Group)
}

// storageVersions returns the storage version of each served CRD, by name.
func (s *Server) storageVersions() map[string]string {
	out := map[string]string{}
	for _, crd := range s.eng.CRDs() {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				out[crd.Name] = v.Name
			}
		}
	}
	return out
}

// storageVersionHash is the hash of the group, version and kind res is
// stored as, which kube-apiserver's discovery lists for every stored
// resource: a custom resource's is its CRD's storage version (storage, by
// CRD name), a built-in kind's its own version. Reviews are not stored.
func storageVersionHash(res kinds.Resource, storage map[string]string) string {
	v := res.GVR.Version
	switch {
	case isReview(res.GVR):
		return ""
	case !res.StoredAs.Empty():
		return discovery.StorageVersionHash(res.StoredAs.Group, res.StoredAs.Version, res.Kind)
	case res.CRD != "":
		if v = storage[res.CRD]; v == "" {
			return ""
		}
	}
	return discovery.StorageVersionHash(res.GVR.Group, v, res.Kind)
}

// wantsAggregated tells whether the client asked for aggregated discovery.
func wantsAggregated(r *http.Request) bool {
	p := acceptParams(r, "APIGroupDiscoveryList")
	return p != nil && p["g"] == "apidiscovery.k8s.io" && p["v"] == "v2"
}

// groupVersions returns the served groups, each with its versions in
// priority order (the preferred first) and their resources.
func (s *Server) groupVersions() (groups []string, versions map[string][]string, resources map[schema.GroupVersion][]kinds.Resource) {
	versions = map[string][]string{}
	resources = map[schema.GroupVersion][]kinds.Resource{}
	for _, res := range append(s.eng.CaughtUpResources(), reviewResources...) {
		gv := res.GVR.GroupVersion()
		if _, ok := resources[gv]; !ok {
			if _, ok := versions[gv.Group]; !ok {
				groups = append(groups, gv.Group)
			}
			versions[gv.Group] = append(versions[gv.Group], gv.Version)
		}
		resources[gv] = append(resources[gv], res)
	}
	for g := range versions {
		vs := versions[g]
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
	}
	sort.Strings(groups)
	return groups, versions, resources
}

func (s *Server) serveCoreVersions(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		s.writeAggregated(w, func(g string) bool { return g == "" })
		return
	}
	writeJSON(w, http.StatusOK, &metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
	})
}

func apiGroup(g string, vs []string) metav1.APIGroup {
	out := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g}
	for _, v := range vs {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
	}
	if len(out.Versions) > 0 {
		out.PreferredVersion = out.Versions[0]
	}
	return out
}

func (s *Server) serveGroups(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		s.writeAggregated(w, func(g string) bool { return g != "" })
		return
	}
	groups, versions, _ := s.groupVersions()
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range groups {
		if g != "" {
			list.Groups = append(list.Groups, apiGroup(g, versions[g]))
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) serveGroup(w http.ResponseWriter, r *http.Request) {
	g := chi.URLParam(r, "group")
	_, versions, _ := s.groupVersions()
	vs, ok := versions[g]
	if !ok || g == "" {
		writeError(w, notFoundResource())
		return
	}
	ag := apiGroup(g, vs)
	writeJSON(w, http.StatusOK, &ag)
}

func (s *Server) serveResourceList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, methodNotAllowed(r))
		return
	}
	gv := requestGV(r)
	_, _, resources := s.groupVersions()
	rs, ok := resources[gv]
	if !ok {
		writeError(w, notFoundResource())
		return
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	storage := s.storageVersions()
	for _, res := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.GVR.Resource, SingularName: res.Singular, Namespaced: res.Namespaced, Kind: res.Kind,
			Verbs: discoveryVerbs(res), ShortNames: res.ShortNames, Categories: res.Categories,
			StorageVersionHash: storageVersionHash(res, storage),
		})
		if finalizable(res) {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.GVR.Resource + "/finalize", Namespaced: res.Namespaced, Kind: res.Kind, Verbs: metav1.Verbs{"update"},
			})
		}
		if res.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.GVR.Resource + "/status", Namespaced: res.Namespaced, Kind: res.Kind, Verbs: subVerbs,
			})
		}
		if res.Scale {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.GVR.Resource + "/scale", Namespaced: res.Namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: subVerbs,
			})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// writeAggregated writes the aggregated discovery document of the groups keep selects.
func (s *Server) writeAggregated(w http.ResponseWriter, keep func(string) bool) {
	groups, versions, resources := s.groupVersions()
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range groups {
		if !keep(g) {
			continue
		}
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		for _, v := range versions[g] {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, res := range resources[schema.GroupVersion{Group: g, Version: v}] {
				scope := apidiscoveryv2.ScopeCluster
				if res.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				kind := &metav1.GroupVersionKind{Group: g, Version: v, Kind: res.Kind}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource: res.GVR.Resource, ResponseKind: kind, Scope: scope, SingularResource: res.Singular,
					Verbs: discoveryVerbs(res), ShortNames: res.ShortNames, Categories: res.Categories,
				}
				if finalizable(res) {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "finalize", ResponseKind: kind, Verbs: []string{"update"},
					})
				}
				if res.Status {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "status", ResponseKind: kind, Verbs: subVerbs,
					})
				}
				if res.Scale {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: subVerbs,
					})
				}
				vd.Resources = append(vd.Resources, rd)
			}
			gd.Versions = append(gd.Versions, vd)
		}
		list.Items = append(list.Items, gd)
	}
	w.Header().Set("Vary", "Accept")
	b, err := jsonMarshal(list)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", aggregatedType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// finalizable tells whether res has the finalize subresource: namespaces,
// whose spec.finalizers only it changes.
func finalizable(res kinds.Resource) bool { return res.Builtin && res.GVR == kinds.NamespaceResource }
