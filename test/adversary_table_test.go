package test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestTableIncludeObjectUnknown asks the built server for Tables with an
// includeObject it does not know. Lists and gets answered rows holding the
// whole objects, as for includeObject=Object, while a watch refused it;
// kube-apiserver refuses it with 400 ("unrecognized includeObject value").
func TestTableIncludeObjectUnknown(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	const cms = "/api/v1/namespaces/default/configmaps"
	if code, b, err := s.Do("POST", cms, s.Token, strings.NewReader(`{"metadata":{"name":"a"},"data":{"k":"v"}}`)); err != nil || code != 201 {
		t.Fatalf("create: %d %s %v", code, b, err)
	}
	table := testserver.DoOptions{Header: http.Header{"Accept": {"application/json;as=Table;g=meta.k8s.io;v=v1"}}}
	for _, path := range []string{cms, cms + "?limit=1", cms + "/a"} {
		code, b, err := s.DoWith("GET", path+sep(path)+"includeObject=Everything", s.Token, nil, table)
		if err != nil {
			t.Fatal(err)
		}
		if code != 400 || !strings.Contains(string(b), `unrecognized includeObject value: \"Everything\"`) {
			t.Errorf("GET %s with includeObject=Everything: %d %.300s", path, code, b)
		}
		code, b, err = s.DoWith("GET", path+sep(path)+"includeObject=Object", s.Token, nil, table)
		if err != nil {
			t.Fatal(err)
		}
		if code != 200 || !strings.Contains(string(b), `"kind":"Table"`) || !strings.Contains(string(b), `"data":{"k":"v"}`) {
			t.Errorf("GET %s with includeObject=Object: %d %.300s", path, code, b)
		}
	}
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}
