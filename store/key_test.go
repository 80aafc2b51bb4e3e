package store

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name                string
		group, res, ns, obj string
		wantPrefix, wantKey string
	}{
		{name: "namespaced", group: "example.setpoint.dev", res: "widgets", ns: "default", obj: "foo",
			wantPrefix: "/example.setpoint.dev/widgets/default/", wantKey: "/example.setpoint.dev/widgets/default/foo"},
		{name: "cluster-scoped", group: "setpoint.dev", res: "plugins", obj: "p",
			wantPrefix: "/setpoint.dev/plugins/", wantKey: "/setpoint.dev/plugins/p"},
		{name: "core group", res: "namespaces", obj: "default",
			wantPrefix: "/core/namespaces/", wantKey: "/core/namespaces/default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResourcePrefix(tt.group, tt.res, tt.ns); got != tt.wantPrefix {
				t.Errorf("ResourcePrefix = %q, want %q", got, tt.wantPrefix)
			}
			if got := ObjectKey(tt.group, tt.res, tt.ns, tt.obj); got != tt.wantKey {
				t.Errorf("ObjectKey = %q, want %q", got, tt.wantKey)
			}
		})
	}
	// A namespace prefix must not match a longer namespace.
	if p := ResourcePrefix("g", "r", "a"); len(ObjectKey("g", "r", "ab", "x")) > 0 &&
		ObjectKey("g", "r", "ab", "x")[:len(p)] == p {
		t.Errorf("prefix %q matches a key of namespace ab", p)
	}
}

// TestPrivateKeys pins the invariant private records rely on: no resource
// key begins with PrivatePrefix, for any group the API can serve (a DNS
// subdomain, or the core group), resource and namespace.
func TestPrivateKeys(t *testing.T) {
	if got, want := PrivateKey("modules/"), "/~setpoint/modules/"; got != want {
		t.Errorf("PrivateKey = %q, want %q", got, want)
	}
	if !IsPrivate(PrivateKey("identity")) {
		t.Errorf("IsPrivate(%q) = false", PrivateKey("identity"))
	}
	groups := []string{"", "core", "apps", "setpoint.dev", "coordination.k8s.io", "example.setpoint.dev", "s"}
	for _, g := range groups {
		for _, key := range []string{ResourcePrefix(g, "modules", ""), ObjectKey(g, "modules", "ns", "x"), ResourcePrefix(g, "", "")} {
			if IsPrivate(key) {
				t.Errorf("resource key %q (group %q) is private", key, g)
			}
		}
	}
	// The invariant rests on group names: a group that is no DNS
	// subdomain could collide, and none is ever served.
	if g := "~setpoint"; len(validation.IsDNS1123Subdomain(g)) == 0 || !IsPrivate(ResourcePrefix(g, "identity", "")) {
		t.Errorf("group %q: the test no longer shows what the invariant rests on", g)
	}
}

// FuzzPrivateKeys checks that no resource key of a servable group begins
// with PrivatePrefix.
func FuzzPrivateKeys(f *testing.F) {
	f.Add("setpoint.dev", "modules", "", "x")
	f.Add("", "namespaces", "", "default")
	f.Add("~setpoint", "identity", "", "")
	f.Fuzz(func(t *testing.T, group, resource, namespace, name string) {
		if group != "" && len(validation.IsDNS1123Subdomain(group)) > 0 {
			return // not a group the API serves
		}
		if key := ObjectKey(group, resource, namespace, name); IsPrivate(key) {
			t.Errorf("resource key %q of group %q is private", key, group)
		}
	})
}
