package serving

import (
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/filters"
)

// TestLongRunningMatchesKubeAPIServer holds LongRunning to the check
// kube-apiserver builds from k8s.io/apiserver
// (BasicLongRunningRequestCheck with its verbs and subresources), over
// requests whose RequestInfo the same factory makes. Two of that check's
// cases are for paths Setpoint does not serve and stay out: the "proxy"
// verb of the old /api/v1/proxy/ paths, and /debug/pprof/.
func TestLongRunningMatchesKubeAPIServer(t *testing.T) {
	kube := filters.BasicLongRunningRequestCheck(
		sets.NewString("watch", "proxy"),
		sets.NewString("attach", "exec", "proxy", "log", "portforward"))
	var paths []string
	for _, base := range []string{
		"/api/v1/namespaces/default/pods",
		"/api/v1/namespaces",
		"/apis/example.setpoint.dev/v1/namespaces/default/widgets",
		"/apis/example.setpoint.dev/v1/widgets",
	} {
		paths = append(paths, base, base+"?watch=true", base+"?watch=1&resourceVersion=5", base+"?watch=false")
		for _, sub := range []string{"", "/status", "/scale", "/log", "/exec", "/attach", "/portforward", "/proxy", "/proxy/x/y", "/binding", "/eviction"} {
			paths = append(paths, base+"/w"+sub, base+"/w"+sub+"?watch=true", base+"/w"+sub+"?fieldSelector=metadata.name%3Dw&watch=true")
		}
	}
	paths = append(paths,
		"/api/v1/watch/namespaces/default/pods", "/api/v1/watch/namespaces/default/pods/p",
		"/apis/example.setpoint.dev/v1/watch/widgets", "/apis/example.setpoint.dev/v1/watch/namespaces/default/widgets/w",
		"/api", "/apis", "/api/v1", "/apis/example.setpoint.dev/v1", "/healthz", "/readyz", "/livez", "/metrics",
		"/openapi/v2", "/openapi/v3/apis/example.setpoint.dev/v1", "/version", "/setpoint/modules",
		"/apis/example.setpoint.dev", "/api/v1/namespaces/default/pods/p/log?follow=true")
	compared := 0
	for _, path := range paths {
		for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			r := httptest.NewRequest(method, path, nil)
			info, err := requestInfoFactory.NewRequestInfo(r)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if info.Verb == "proxy" || strings.HasPrefix(info.Path, "/debug/pprof/") {
				continue
			}
			r = r.WithContext(request.WithRequestInfo(r.Context(), info))
			if got, want := LongRunning(r), kube(r, info); got != want {
				t.Errorf("%s %s (verb %q, subresource %q): LongRunning %v, kube-apiserver %v",
					method, path, info.Verb, info.Subresource, got, want)
			}
			compared++
		}
	}
	if compared < 500 {
		t.Fatalf("only %d requests compared", compared)
	}
	// A request without a RequestInfo is never long-running.
	if LongRunning(httptest.NewRequest("GET", "/api/v1/pods?watch=true", nil)) {
		t.Error("LongRunning without a RequestInfo")
	}
}
