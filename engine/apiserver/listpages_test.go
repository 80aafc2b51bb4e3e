package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

// TestFullListsInPages checks that a full list read in pages (JSON
// streamed, Tables and PartialObjectMetadata assembled from pages) answers
// exactly what one read of the whole list answers.
func TestFullListsInPages(t *testing.T) {
	ts := newTestServer(t)
	ts.registerBlobs(t)
	for i := range 7 {
		ts.mustDo(t, http.StatusCreated, request{method: "POST", path: blobsPath, body: blobJSON(fmt.Sprintf("b%d", i), fmt.Sprint("data ", i))})
	}
	paged, err := New(Options{Engine: ts.eng})
	if err != nil {
		t.Fatal(err)
	}
	paged.pageSize = 2
	ps := httptest.NewServer(paged)
	defer ps.Close()
	whole := ts // pages of 500: the whole list at once
	pts := &testServer{Server: ps, api: paged, eng: ts.eng, db: ts.db}

	rv := ""
	for _, tc := range []struct{ name, accept, query string }{
		{name: "JSON"},
		{name: "Table", accept: "application/json;as=Table;g=meta.k8s.io;v=v1"},
		{name: "Table with objects", accept: "application/json;as=Table;g=meta.k8s.io;v=v1", query: "&includeObject=Object"},
		{name: "PartialObjectMetadata", accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{name: "selector", query: "&fieldSelector=metadata.name%21%3Db3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rv == "" {
				var st struct {
					Metadata struct{ ResourceVersion string } `json:"metadata"`
				}
				b := whole.mustDo(t, http.StatusOK, request{path: blobsPath})
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				rv = st.Metadata.ResourceVersion
			}
			// At one revision, so both answers are of the same objects.
			path := blobsPath + "?resourceVersion=" + rv + "&resourceVersionMatch=NotOlderThan" + tc.query
			want := whole.mustDo(t, http.StatusOK, request{path: path, accept: tc.accept})
			got := pts.mustDo(t, http.StatusOK, request{path: path, accept: tc.accept})
			// The Age cell is computed at each answer, and the two may fall
			// on either side of a second.
			got, want = ageCell.ReplaceAll(got, []byte(`$1"AGE"`)), ageCell.ReplaceAll(want, []byte(`$1"AGE"`))
			if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
				t.Errorf("in pages of 2:\n%s\nwhole:\n%s", got, want)
			}
			if !bytes.Contains(got, []byte(`"b6"`)) {
				t.Errorf("the last page is missing: %s", got)
			}
		})
	}
}

// ageCell matches a Table row's cells up to its Age, the second cell.
var ageCell = regexp.MustCompile(`("cells":\["[^"]*",)"[0-9]+[smhdy]"`)
