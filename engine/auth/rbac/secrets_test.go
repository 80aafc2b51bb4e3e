package rbac

import (
	"testing"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// TestDefaultRolesSecrets: as in Kubernetes, view reads ConfigMaps but not
// Secrets, and edit (so admin) reads and writes both.
func TestDefaultRolesSecrets(t *testing.T) {
	s := serve(t)
	s.mustCreate(t, roleBinding("team", "editors", "ClusterRole", "edit", userSubject("ed")),
		roleBinding("team", "viewers", "ClusterRole", "view", userSubject("viewer")))
	ed, viewer := who("ed"), who("viewer")
	inTeam := func(verb, resource string) authorizer.AttributesRecord {
		r := resourceReq(verb, "", resource, "", "")
		r.Namespace = "team"
		return r
	}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		s.waitDecision(t, ed, inTeam(verb, "secrets"), authorizer.DecisionAllow)
		s.waitDecision(t, ed, inTeam(verb, "configmaps"), authorizer.DecisionAllow)
	}
	s.waitDecision(t, viewer, inTeam("list", "configmaps"), authorizer.DecisionAllow)
	for _, verb := range []string{"get", "list", "watch", "create"} {
		if d := s.decide(viewer, inTeam(verb, "secrets")); d == authorizer.DecisionAllow {
			t.Errorf("view may %s secrets", verb)
		}
	}
	if d := s.decide(viewer, inTeam("create", "configmaps")); d == authorizer.DecisionAllow {
		t.Error("view may create configmaps")
	}
}
