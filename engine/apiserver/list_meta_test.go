package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestListMetadata checks a JSON list's metadata as ListMeta encodes it:
// continue only when there is more, resourceVersion always.
func TestListMetadata(t *testing.T) {
	ts := newTestServer(t)
	ts.registerWidget(t)
	for _, n := range []string{"a", "b"} {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: widgetsPath, body: widgetJSON(n, "small", nil)})
	}
	meta := func(path string) map[string]any {
		t.Helper()
		var l struct {
			Metadata map[string]any `json:"metadata"`
		}
		if err := json.Unmarshal(ts.mustDo(t, http.StatusOK, request{path: path}), &l); err != nil {
			t.Fatal(err)
		}
		return l.Metadata
	}
	if m := meta(widgetsPath); m["resourceVersion"] == "" || len(m) != 1 {
		t.Errorf("metadata of a whole list: %v, want resourceVersion alone", m)
	}
	if m := meta(widgetsPath + "?limit=1"); m["continue"] == nil || m["continue"] == "" || m["resourceVersion"] == "" {
		t.Errorf("metadata of a first page: %v, want continue and resourceVersion", m)
	}
}
