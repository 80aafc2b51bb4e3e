package rbac

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// BenchmarkAuthorize decides requests of 100 users against 1,000
// RoleBindings (ten per user, over 50 namespaces, to namespaced Roles of
// five rules and to the default ClusterRoles) besides the default roles
// and bindings, half of them allowed. It reports the median and 99th
// percentile of one decision (p50-ns, p99-ns):
//
//	go test -run '^$' -bench BenchmarkAuthorize -benchtime 200000x ./engine/auth/rbac/
func BenchmarkAuthorize(b *testing.B) {
	const (
		users      = 100
		namespaces = 50
		perUser    = 10
	)
	var objs []any
	for _, r := range DefaultClusterRoles() {
		objs = append(objs, &r)
	}
	for _, cb := range DefaultClusterRoleBindings() {
		objs = append(objs, &cb)
	}
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%d", n)
		for k := range 5 {
			rules := make([]rbacv1.PolicyRule, 5)
			for i := range rules {
				rules[i] = rule(read, fmt.Sprintf("g%d.example.com", i), fmt.Sprintf("things-%d-%d", k, i), fmt.Sprintf("things-%d-%d/status", k, i))
			}
			objs = append(objs, role(ns, fmt.Sprintf("role-%d", k), rules...))
		}
	}
	bindings := 0
	for u := range users {
		for i := range perUser {
			ns := fmt.Sprintf("ns-%d", (u*perUser+i)%namespaces)
			name := fmt.Sprintf("u%d-b%d", u, i)
			if i == 0 {
				objs = append(objs, roleBinding(ns, name, "ClusterRole", "view", userSubject(fmt.Sprintf("user-%d", u))))
			} else {
				objs = append(objs, roleBinding(ns, name, "Role", fmt.Sprintf("role-%d", i%5),
					userSubject(fmt.Sprintf("user-%d", u)), groupSubject(fmt.Sprintf("group-%d", u%10))))
			}
			bindings++
		}
	}
	if bindings != 1000 {
		b.Fatalf("%d RoleBindings", bindings)
	}
	a := loaded(objs...)
	ctx := context.Background()
	reqs := make([]authorizer.AttributesRecord, 0, 4096)
	allowed := 0
	for i := range cap(reqs) {
		u := i % users
		who := &user.DefaultInfo{Name: fmt.Sprintf("user-%d", u), Groups: []string{fmt.Sprintf("group-%d", u%10), user.AllAuthenticated}}
		binding := (i / users) % perUser
		ns := fmt.Sprintf("ns-%d", (u*perUser+binding)%namespaces)
		if i%2 == 1 { // another user's namespace most of the time
			ns = fmt.Sprintf("ns-%d", (i*7)%namespaces)
		}
		k := binding % 5
		r := authorizer.AttributesRecord{
			User: who, Verb: "get", Namespace: ns, ResourceRequest: true,
			APIGroup: fmt.Sprintf("g%d.example.com", i%5), Resource: fmt.Sprintf("things-%d-%d", k, i%5), Name: "x",
		}
		if d, _, _ := a.Authorize(ctx, r); d == authorizer.DecisionAllow {
			allowed++
		}
		reqs = append(reqs, r)
	}
	b.Logf("%d of %d requests allowed", allowed, len(reqs))
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		_, _, _ = a.Authorize(ctx, reqs[i%len(reqs)])
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}
