package test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestKubectlMistypedBuiltin: the real kubectl gets kube-apiserver v1.34's
// answer, word for word, for built-in objects whose values have the wrong
// JSON type: the decoder's 400 for a create and for a replace (of a
// missing object too), and 422 on the field "patch" for a strategic merge
// patch and for kubectl apply's patch of an existing object.
func TestKubectlMistypedBuiltin(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badCM := file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\ndata: {a: 1}\n")
	badRole := file("role.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: default}\n"+
		"rules: [{verbs: get, apiGroups: [\"\"], resources: [pods]}]\n")
	if _, errOut, err := s.Kubectl("create", "configmap", "good", "--from-literal=a=1"); err != nil {
		t.Fatal(err, errOut)
	}
	goodBad := file("good.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, namespace: default}\ndata: {a: 1}\n")
	const cmErr = `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "-f", badCM}, `Error from server (BadRequest): error when creating "` + badCM + `": ` + cmErr},
		{[]string{"create", "-f", badRole}, `Error from server (BadRequest): error when creating "` + badRole + `": Role in version "v1" cannot be handled as a Role: ` +
			`json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string`},
		{[]string{"replace", "-f", badCM}, `Error from server (BadRequest): error when replacing "` + badCM + `": ` + cmErr},
		{[]string{"replace", "-f", goodBad}, `Error from server (BadRequest): error when replacing "` + goodBad + `": ` + cmErr},
		{[]string{"patch", "configmap", "good", "-p", `{"data":{"a":1}}`}, `The request is invalid: patch: Invalid value: "map[data:map[a:1]]": cannot convert int64 to string`},
	} {
		_, errOut, err := s.Kubectl(tc.args...)
		if err == nil || errOut != tc.want+"\n" {
			t.Errorf("kubectl %q: %v\n got %q\nwant %q", tc.args, err, errOut, tc.want+"\n")
		}
	}
}
