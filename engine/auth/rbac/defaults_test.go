package rbac

import (
	"slices"
	"testing"
)

// TestDefaultRulesSorted: as Kubernetes' bootstrap policy builds them, each
// default role's rules list their verbs, resources and URLs sorted and
// without repeats, which is how kubectl shows them.
func TestDefaultRulesSorted(t *testing.T) {
	for _, r := range DefaultClusterRoles() {
		for i, rule := range r.Rules {
			for what, l := range map[string][]string{"verbs": rule.Verbs, "resources": rule.Resources, "nonResourceURLs": rule.NonResourceURLs} {
				if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
					t.Errorf("%s rule %d: %s %q, want sorted without repeats", r.Name, i, what, l)
				}
			}
		}
	}
	discovery := DefaultClusterRoles()[1]
	if want := []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}; discovery.Name != "system:discovery" ||
		!slices.Equal(discovery.Rules[0].NonResourceURLs, want) {
		t.Errorf("%s: %q, want %q", discovery.Name, discovery.Rules[0].NonResourceURLs, want)
	}
}
