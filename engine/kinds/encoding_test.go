package kinds

import "testing"

func TestServedJSONOtherDocuments(t *testing.T) {
	sv := &Kind{Resource: Resource{GVR: widgets, Kind: "Widget"}}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"stored form", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{}}` + "\n",
			`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"resourceVersion":"7","name":"a"},"spec":{}}`},
		{"empty metadata", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{}}`,
			`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"resourceVersion":"7"}}`},
		{"other version", `{"apiVersion":"example.setpoint.dev/v2","kind":"Widget","metadata":{"name":"a"}}`, ""},
		{"no metadata", `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","spec":{}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(sv.ServedJSON([]byte(tc.doc), 7)); got != tc.want {
				t.Errorf("servedJSON = %s, want %s", got, tc.want)
			}
		})
	}
}
