package encrypt

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/store"
)

func TestResourceOf(t *testing.T) {
	tests := []struct {
		key, group, resource string
		ok                   bool
	}{
		{"/core/secrets/default/db", "", "secrets", true},
		{"/core/secrets/", "", "secrets", true},
		{"/apps/deployments/ns/d", "apps", "deployments", true},
		{"/core/secrets", "", "", false},
		{"/core/", "", "", false},
		{"/", "", "", false},
		{"", "", "", false},
		{"core/secrets/x", "", "", false},
		{"//0/", "", "", false}, // testdata/fuzz: the core group is "core", never empty
		{store.PrivateKey("identity"), "", "", false},
	}
	for _, tt := range tests {
		gr, ok := resourceOf(tt.key)
		if ok != tt.ok || gr.Group != tt.group || gr.Resource != tt.resource {
			t.Errorf("resourceOf(%q) = %v, %v; want %s/%s, %v", tt.key, gr, ok, tt.group, tt.resource, tt.ok)
		}
	}
}

// FuzzResourceOf: any key parses without panicking, and a parsed key is a
// resource key of the resource it names.
func FuzzResourceOf(f *testing.F) {
	for _, k := range []string{"/core/secrets/default/db", "/a/b/", "/~setpoint/x/y", "//", "/core//x"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		gr, ok := resourceOf(key)
		if !ok {
			return
		}
		group := gr.Group
		if group == "" {
			group = store.CoreGroup
		}
		if store.IsPrivate(key) || gr.Resource == "" || !strings.HasPrefix(key, store.ResourcePrefix(group, gr.Resource, "")) {
			t.Fatalf("resourceOf(%q) = %v", key, gr)
		}
	})
}
