package test

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestEventsAndSelectorsAsKubeAPIServer: the real kubectl shows what it
// shows against kube-apiserver v1.34 for Events and selectors: an Event
// is served as corev1.Event encodes it (the unset fields kube-apiserver
// always serves included) and validated as kube-apiserver validates one
// written through core/v1, its name any path segment (and through
// events.k8s.io/v1, naming the reporting controller as that API does);
// Secrets take the field selector type; an
// unknown field label and a malformed selector are refused with
// kube-apiserver's messages, as are a path to a subresource the kind
// lacks, one to no resource and a merge patch that is not JSON; removing
// the last label leaves no labels.
func TestEventsAndSelectorsAsKubeAPIServer(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	run := func(stdin string, args ...string) (string, string) {
		t.Helper()
		out, errOut, _ := s.KubectlInput(stdin, args...)
		return out, errOut
	}

	t.Run("event encoding", func(t *testing.T) {
		if _, errOut := run("apiVersion: v1\nkind: Event\nmetadata: {name: e1, namespace: default}\n"+
			"involvedObject: {kind: ConfigMap, name: cm1}\nreason: R\nmessage: m\n", "create", "-f", "-"); errOut != "" {
			t.Fatal(errOut)
		}
		out, errOut := run("", "get", "event", "e1", "-o", "go-template={{range $k, $v := .}}{{$k}}={{$v}} {{end}}")
		const want = "apiVersion=v1 eventTime=<no value> firstTimestamp=<no value> involvedObject=map[kind:ConfigMap name:cm1] " +
			"kind=Event lastTimestamp=<no value> message=m metadata=map[creationTimestamp:"
		const tail = " reason=R reportingComponent= reportingInstance= source=map[] "
		if !strings.HasPrefix(out, want) || !strings.HasSuffix(out, tail) {
			t.Errorf("kubectl get event: %q%s\nwant %q...%q", out, errOut, want, tail)
		}
	})

	t.Run("event validation", func(t *testing.T) {
		// A core/v1 Event's name need only be a path segment.
		if _, errOut := run("apiVersion: v1\nkind: Event\nmetadata: {name: Pod_X.1, namespace: default}\n"+
			"involvedObject: {kind: ConfigMap, name: cm1, namespace: default}\n", "create", "-f", "-"); errOut != "" {
			t.Errorf("kubectl create -f - of an Event named Pod_X.1: %s", errOut)
		}
		// Such an Event may be updated through events.k8s.io/v1 too,
		// whose DNS subdomain rule holds on create only.
		if _, errOut := run("", "label", "events.v1.events.k8s.io", "Pod_X.1", "seen=yes"); errOut != "" {
			t.Errorf("kubectl label events.v1.events.k8s.io Pod_X.1: %s", errOut)
		}
		for _, tc := range []struct{ apiVersion, doc, want string }{
			{"v1", "involvedObject: {kind: ConfigMap, name: cm1, namespace: other}\n",
				`The Event "e2" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace` + "\n"},
			{"v1", "involvedObject: {kind: ConfigMap, name: cm1, namespace: default}\neventTime: \"2026-11-27T01:00:00.000000Z\"\ntype: Bogus\n",
				`The Event "e2" is invalid: ` + "\n" +
					"* reportingComponent: Required value\n" +
					`* reportingComponent: Invalid value: "": name part must be non-empty` + "\n" +
					`* reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')` + "\n" +
					"* reportingInstance: Required value\n* action: Required value\n* reason: Required value\n"},
			// Through events.k8s.io/v1 the same rule names the field
			// as that API does, then come that API's own rules.
			{"events.k8s.io/v1", "regarding: {kind: ConfigMap, name: cm1, namespace: default}\neventTime: \"2026-11-27T01:00:00.000000Z\"\ntype: Bogus\n" +
				"reportingController: a b\nreportingInstance: i\naction: A\nreason: R\n",
				`The Event "e2" is invalid: ` + "\n" +
					`* reportingController: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')` + "\n" +
					`* type: Invalid value: "": has invalid value: Bogus` + "\n"},
		} {
			_, errOut := run("apiVersion: "+tc.apiVersion+"\nkind: Event\nmetadata: {name: e2, namespace: default}\n"+tc.doc, "create", "-f", "-")
			if errOut != tc.want {
				t.Errorf("kubectl create -f -:\n got %q\nwant %q", errOut, tc.want)
			}
		}
	})

	t.Run("missing subresource", func(t *testing.T) {
		if _, errOut := run(fidelityCRD, "apply", "-f", "-"); errOut != "" {
			t.Fatal(errOut)
		}
		if _, errOut := run("", "wait", "--for=condition=Established", "crd/gadgets.fidelity.setpoint.dev", "--timeout=30s"); errOut != "" {
			t.Fatal(errOut)
		}
		for _, tc := range []struct{ path, want string }{
			{"/apis/fidelity.setpoint.dev/v1/namespaces/default/gadgets/g/scale", `gadgets.fidelity.setpoint.dev "g" not found`},
			{"/api/v1/namespaces/default/configmaps/c/scale", "the server could not find the requested resource"},
			{"/api/v1/nosuch", "the server could not find the requested resource"},
		} {
			if _, errOut := run("", "get", "--raw", tc.path); errOut != "Error from server (NotFound): "+tc.want+"\n" {
				t.Errorf("kubectl get --raw %s: %q, want %q", tc.path, errOut, tc.want)
			}
		}
	})

	t.Run("malformed merge patch", func(t *testing.T) {
		if _, errOut := run("", "create", "configmap", "p1"); errOut != "" {
			t.Fatal(errOut)
		}
		const want = "Error from server (BadRequest): error decoding patch: invalid character 'b' looking for beginning of object key string\n"
		if _, errOut := run("", "patch", "configmap", "p1", "--type=merge", "-p", "{bad json"); errOut != want {
			t.Errorf("kubectl patch --type=merge: %q, want %q", errOut, want)
		}
	})

	t.Run("last label removed", func(t *testing.T) {
		run("", "create", "configmap", "l1")
		run("", "label", "configmap", "l1", "a=b")
		if out, errOut := run("", "label", "configmap", "l1", "a-"); out != "configmap/l1 unlabeled\n" {
			t.Fatalf("kubectl label a-: %q %q", out, errOut)
		}
		// The ConfigMap has no labels left, so kubectl's own {} makes a
		// change it reports, as against kube-apiserver.
		if out, _ := run("", "label", "configmap", "l1", "a-"); out != "label \"a\" not found.\nconfigmap/l1 labeled\n" {
			t.Errorf("kubectl label a- again: %q", out)
		}
		if out, _ := run("", "get", "configmap", "l1", "-o", "go-template={{.metadata.labels}}"); out != "<no value>" {
			t.Errorf("labels after removing the last: %q, want none", out)
		}
	})

	t.Run("selectors", func(t *testing.T) {
		if _, errOut := run("", "create", "secret", "generic", "s1", "--from-literal=a=b"); errOut != "" {
			t.Fatal(errOut)
		}
		if out, errOut := run("", "get", "secrets", "--field-selector", "type=Opaque", "-o", "name"); out != "secret/s1\n" {
			t.Errorf("kubectl get secrets --field-selector type=Opaque: %q %q, want secret/s1", out, errOut)
		}
		const unable = `Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector `
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--field-selector", "data.a=b"},
				unable + `"", field selector "data.a=b": "data.a" is not a known field selector: only "metadata.name", "metadata.namespace"` + "\n"},
			{[]string{"-l", "a=("},
				unable + `"a=(", field selector "": unable to parse requirement: found '(', expected: identifier` + "\n"},
			{[]string{"--field-selector", "a b"},
				unable + `"", field selector "a b": invalid selector: 'a b'; can't understand 'a b'` + "\n"},
		} {
			if _, errOut := run("", append([]string{"get", "configmaps"}, tc.args...)...); errOut != tc.want {
				t.Errorf("kubectl get configmaps %s:\n got %q\nwant %q", strings.Join(tc.args, " "), errOut, tc.want)
			}
		}
	})
}
