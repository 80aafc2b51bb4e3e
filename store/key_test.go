package store

import "testing"

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
