package test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestBuiltinIntegerWrittenAsFloat: a number written with a fraction or an
// exponent (1.0, 1e0) in an integer field of a built-in object is refused
// as kube-apiserver v1.34's decoder refuses it, with a 400 naming the
// field, on create and on update; written as 1 it is stored.
func TestBuiltinIntegerWrittenAsFloat(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	const path = "/api/v1/namespaces/default/events"
	event := func(name, count, rv string) string {
		meta := `"name":"` + name + `","namespace":"default"`
		if rv != "" {
			meta += `,"resourceVersion":"` + rv + `"`
		}
		return `{"apiVersion":"v1","kind":"Event","metadata":{` + meta + `},` +
			`"involvedObject":{"kind":"ConfigMap","namespace":"default","name":"cm"},"reason":"R","message":"m","type":"Normal",` +
			`"count":` + count + `}`
	}
	const prefix = `Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number `
	const suffix = ` into Go struct field Event.count of type int32`
	for _, count := range []string{"1.0", "1e0", "2.000", "1.5"} {
		code, b, err := s.Do("POST", path, s.Token, strings.NewReader(event("e", count, "")))
		if err != nil {
			t.Fatal(err)
		}
		reason, msg := decodeStatus(t, b)
		if code != http.StatusBadRequest || reason != "BadRequest" || !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, suffix) {
			t.Errorf("create with count %s: %d %s, want 400 %q", count, code, b, prefix+count+suffix)
		}
	}
	code, b, err := s.Do("POST", path, s.Token, strings.NewReader(event("e", "1", "")))
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create with count 1: %d %s %v", code, b, err)
	}
	var created struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(b, &created); err != nil {
		t.Fatal(err)
	}
	code, b, err = s.Do("PUT", path+"/e", s.Token, strings.NewReader(event("e", "2.0", created.Metadata.ResourceVersion)))
	if err != nil {
		t.Fatal(err)
	}
	if _, msg := decodeStatus(t, b); code != http.StatusBadRequest || msg != prefix+"2.0"+suffix {
		t.Errorf("update with count 2.0: %d %s, want 400 %q", code, b, prefix+"2.0"+suffix)
	}
	code, b, err = s.Do("PUT", path+"/e", s.Token, strings.NewReader(event("e", "2", created.Metadata.ResourceVersion)))
	if err != nil || code != http.StatusOK {
		t.Fatalf("update with count 2: %d %s %v", code, b, err)
	}
}
