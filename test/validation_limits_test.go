package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// procUsage reads a process's resident memory (VmRSS, VmHWM in KiB) and CPU
// time from /proc.
type procUsage struct {
	rssKiB, hwmKiB int64
	cpu            time.Duration
}

func readProcUsage(t *testing.T, pid int) procUsage {
	t.Helper()
	var u procUsage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.rssKiB = n
		case "VmHWM:":
			u.hwmKiB = n
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces): utime and stime
	// are the 14th and 15th fields of the line, in clock ticks (100/s).
	rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	u.cpu = time.Duration(ut+st) * 10 * time.Millisecond
	return u
}

// enumCRD is a namespaced kind Box whose spec.items are strings from an enum
// of n values, and spec.tags strings that an anyOf alternative limits to
// "a" (schema junctors are validated apart).
func enumCRD(n int) string {
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("%q", fmt.Sprintf("value-%d", i))
	}
	return testsupport.CRD{Group: "limits.example.dev", Kind: "Box", Plural: "boxes", Schema: `{"type":"object","properties":{"spec":{
  "type":"object",
  "properties":{"items":{"type":"array","items":{"type":"string","enum":[` + strings.Join(values, ",") + `]}},
                "tags":{"type":"array","items":{"type":"string"}}},
  "anyOf":[{"properties":{"tags":{"items":{"enum":["a"]}}}}]}}}`}.String()
}

// invalidBox is a Box with n items outside the enum in field ("items" or
// "tags").
func invalidBox(name, field string, n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("bad-%d", i)
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "limits.example.dev/v1", "kind": "Box",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{field: items},
	})
	return b
}

const boxesPath = "/apis/limits.example.dev/v1/namespaces/default/boxes"

// One create must not be able to take the server down: objects with tens of
// thousands of invalid items (against an enum, or inside an anyOf) are
// answered 422 with a bounded Status in bounded time and memory, and a CRD
// with an oversized enum is refused. Before the bounds, 20,000 invalid items
// against a 120,000-value enum took the server past 24 GB, and without an
// enum the CPU time grew with the square of the items.
func TestValidationOfHostileObjectsIsBounded(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})

	code, body, err := s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, strings.NewReader(enumCRD(1001)))
	if err != nil || code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "must have at most 1000 items") {
		t.Fatalf("CRD with a 1001-value enum: %d %v %.300s", code, err, body)
	}
	code, body, err = s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, strings.NewReader(enumCRD(1000)))
	if err != nil || code != http.StatusCreated {
		t.Fatalf("CRD: %d %v %s", code, err, body)
	}
	testsupport.Eventually(t, 30*time.Second, "boxes served", func() bool {
		c, _, _ := s.Do("GET", boxesPath, s.Token, nil)
		return c == http.StatusOK
	})

	base := readProcUsage(t, s.Pid())
	for _, tc := range []struct {
		field string
		n     int
	}{{"items", 20000}, {"items", 80000}, {"tags", 20000}, {"tags", 80000}} {
		obj := invalidBox(fmt.Sprintf("%s-%d", tc.field, tc.n), tc.field, tc.n)
		before := readProcUsage(t, s.Pid())
		start := time.Now()
		code, body, err := s.Do("POST", boxesPath, s.Token, bytes.NewReader(obj))
		took := time.Since(start)
		after := readProcUsage(t, s.Pid())
		t.Logf("%d invalid %s (%d KB body): %d in %v, server CPU %v, RSS %d MiB (peak %d MiB), answer %d KB",
			tc.n, tc.field, len(obj)/1000, code, took.Round(time.Millisecond), after.cpu-before.cpu, after.rssKiB>>10, after.hwmKiB>>10, len(body)/1000)
		if err != nil || code != http.StatusUnprocessableEntity {
			t.Fatalf("create: %d %v %.300s", code, err, body)
		}
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		if n := len(st.Details.Causes); n > 102 {
			t.Errorf("%d causes", n)
		}
		if last := st.Details.Causes[len(st.Details.Causes)-1].Message; !strings.Contains(last, "too many errors") {
			t.Errorf("last cause %q, want the note that validation stopped", last)
		}
		if len(body) > 160<<10 {
			t.Errorf("answer of %d bytes", len(body))
		}
		if took > 20*time.Second || after.cpu-before.cpu > 20*time.Second {
			t.Errorf("took %v, %v of CPU", took, after.cpu-before.cpu)
		}
	}
	// An item schema of 1000 properties and 100,000 items: the validator
	// and defaulting walked every property for every item (almost 4
	// minutes for 300,000).
	props := make([]string, 1000)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"type":"string"}`, i)
	}
	wide := testsupport.CRD{Group: "limits.example.dev", Kind: "Wide", Schema: `{"type":"object","properties":{"spec":{
  "type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}}}}`}.String()
	if code, body, err := s.Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", s.Token, strings.NewReader(wide)); err != nil || code != http.StatusCreated {
		t.Fatalf("CRD: %d %v %.300s", code, err, body)
	}
	const widesPath = "/apis/limits.example.dev/v1/namespaces/default/wides"
	testsupport.Eventually(t, 30*time.Second, "wides served", func() bool {
		c, _, _ := s.Do("GET", widesPath, s.Token, nil)
		return c == http.StatusOK
	})
	obj := `{"apiVersion":"limits.example.dev/v1","kind":"Wide","metadata":{"name":"w"},"spec":{"items":[{}` + strings.Repeat(`,{}`, 99999) + `]}}`
	before := readProcUsage(t, s.Pid())
	start := time.Now()
	code, body, err = s.Do("POST", widesPath, s.Token, strings.NewReader(obj))
	took := time.Since(start)
	after := readProcUsage(t, s.Pid())
	t.Logf("100,000 items against 1000 properties (%d KB body): %d in %v, server CPU %v", len(obj)/1000, code, took.Round(time.Millisecond), after.cpu-before.cpu)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %v %.300s", code, err, body)
	}
	if took > 20*time.Second || after.cpu-before.cpu > 10*time.Second {
		t.Errorf("took %v, %v of CPU", took, after.cpu-before.cpu)
	}

	end := readProcUsage(t, s.Pid())
	if grew := end.hwmKiB - base.rssKiB; grew > 512<<10 {
		t.Errorf("peak RSS grew by %d MiB", grew>>10)
	}

}
