package engine

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// storedMetaView is what ownership and deletion are decided on of a
// document's metadata: a deletionTimestamp's presence, not its spelling.
type storedMetaView struct {
	UID, Name, Namespace string
	Deleting             bool
	Finalizers           []string
	Owners               []string
}

func viewOf(m StoredMeta) storedMetaView {
	v := storedMetaView{UID: string(m.UID), Name: m.Name, Namespace: m.Namespace, Deleting: m.Deleting(), Finalizers: m.Finalizers}
	for _, o := range m.OwnerReferences {
		b := "false"
		if o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
			b = "true"
		}
		v.Owners = append(v.Owners, o.APIVersion+"|"+o.Kind+"|"+o.Name+"|"+string(o.UID)+"|"+b)
	}
	return v
}

var storedMetaDocs = []struct{ name, doc string }{
	{"plain", `{"apiVersion":"v1","kind":"Widget","metadata":{"name":"a","namespace":"default","uid":"u1"},"spec":{"x":[1,2,{"y":"}"}]}}`},
	{"owners and finalizers", `{"metadata":{"finalizers":["orphan","foregroundDeletion","x"],"name":"a","ownerReferences":[{"apiVersion":"example.setpoint.dev/v1","blockOwnerDeletion":true,"controller":true,"kind":"Widget","name":"o","uid":"ou"},{"apiVersion":"v1","kind":"Namespace","name":"n","uid":"nu","blockOwnerDeletion":null}],"uid":"u2"}}`},
	{"deleting", `{"metadata":{"deletionTimestamp":"2026-11-21T08:00:00Z","finalizers":["kubernetes"],"name":"ns","uid":"u3"},"status":{"phase":"Terminating"}}`},
	{"null fields", `{"metadata":{"deletionTimestamp":null,"finalizers":null,"ownerReferences":null,"name":"a","uid":"u4"}}`},
	{"escapes", `{"metadata":{"name":"a\"b\\c\u00e9","annotations":{"k":"{[\"]}"},"uid":"u5"},"spec":"\\"}`},
	{"whitespace", " {\n \"metadata\" : { \"uid\" : \"u6\" , \"name\" : \"a\" , \"finalizers\" : [ \"orphan\" ] } , \"spec\" : { } } "},
	{"key case", `{"metadata":{"UID":"u7","name":"a"}}`},
	{"metadata case", `{"Metadata":{"uid":"u8","name":"a"}}`},
	{"duplicate metadata", `{"metadata":{"uid":"u9","name":"a"},"metadata":{"name":"b"}}`},
	{"null name", `{"metadata":{"uid":"u10","name":null}}`},
	{"no uid", `{"metadata":{"name":"a"}}`},
	{"module bytes", "\x00asm\x01\x00\x00\x00"},
	{"not an object", `["metadata"]`},
	{"user data in a key that folds to metadata", `{"METADATA":{"ownerReferences":[{"apiVersion":"v1","kind":"Widget","name":"ghost","uid":"gu"}],"finalizers":["orphan"],"deletionTimestamp":"2026-11-21T08:00:00Z"},"apiVersion":"v1","metadata":{"name":"a","uid":"u12"}}`},
	{"key case in owner references", `{"metadata":{"name":"a","uid":"u13","ownerReferences":[{"UID":"x","uid":"y","Name":"n"}]}}`},
	{"managed fields", `{"metadata":{"managedFields":[{"fieldsV1":{"f:metadata":{"f:ownerReferences":{}}},"manager":"m"}],"name":"a","uid":"u11"}}`},
}

// scanFallsBack are the documents the scanner leaves to exactStoredMeta: not
// JSON objects, or not with string members where metadata has them.
var scanFallsBack = map[string]bool{"module bytes": true, "not an object": true, "null name": true}

// The scanner reads what the engine's own decoding reads (exactStoredMeta): keys
// matched exactly, the last of duplicates. It is checked on its own, not
// through DecodeStoredMeta, whose fallback would hide a scanner that gave up.
func TestDecodeStoredMetaMatchesTheEngine(t *testing.T) {
	for _, tc := range storedMetaDocs {
		t.Run(tc.name, func(t *testing.T) {
			if _, scanned := scanStoredMeta([]byte(tc.doc)); scanned == scanFallsBack[tc.name] {
				t.Errorf("the scanner handled it: %v, want %v", scanned, !scanFallsBack[tc.name])
			}
			got, gotOK := DecodeStoredMeta([]byte(tc.doc))
			want, wantOK := exactStoredMeta([]byte(tc.doc))
			if gotOK != wantOK {
				t.Fatalf("ok = %v, the engine's decoding %v", gotOK, wantOK)
			}
			if diff := cmp.Diff(viewOf(want), viewOf(got)); gotOK && diff != "" {
				t.Errorf("metadata differs from the engine's decoding (-want +got):\n%s", diff)
			}
		})
	}
	// User data under a key that only folds to "metadata" is not metadata.
	doc := `{"METADATA":{"ownerReferences":[{"apiVersion":"v1","kind":"Widget","name":"ghost","uid":"gu"}],"finalizers":["orphan"],"deletionTimestamp":"2026-11-21T08:00:00Z"},"metadata":{"name":"a","uid":"u"}}`
	m, ok := DecodeStoredMeta([]byte(doc))
	if v := viewOf(m); !ok || len(v.Owners) != 0 || len(v.Finalizers) != 0 || v.Deleting {
		t.Errorf("a METADATA member of the user's was read as metadata: %+v", v)
	}
}

func FuzzDecodeStoredMeta(f *testing.F) {
	for _, tc := range storedMetaDocs {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScanStoredMeta(t, b) })
}

// checkScanStoredMeta fails when the scanner reads a valid JSON document
// other than exactStoredMeta does. It must not panic on any input. It
// reports whether the scanner read b rather than leaving it to
// exactStoredMeta.
func checkScanStoredMeta(t *testing.T, b []byte) bool {
	t.Helper()
	got, gotOK := scanStoredMeta(b) // must not panic
	if !json.Valid(b) {
		return false // stored documents are valid JSON
	}
	if !gotOK {
		return false // left to exactStoredMeta
	}
	gotOK = got.UID != ""
	want, wantOK := exactStoredMeta(b)
	if gotOK != wantOK {
		t.Fatalf("%s: ok = %v, the engine's decoding %v", b, gotOK, wantOK)
	}
	if diff := cmp.Diff(viewOf(want), viewOf(got)); gotOK && diff != "" {
		t.Fatalf("%s: metadata differs from the engine's decoding (-want +got):\n%s", b, diff)
	}
	return true
}

// The scanner against exactStoredMeta, as FuzzDecodeStoredMeta, on 2000
// documents made from a fixed seed: the seed documents with random changes
// to their values (kindstest.Rand) or to their bytes.
func TestScanStoredMetaSweep(t *testing.T) {
	r := kindstest.NewRand(6)
	r.Keys = append(slices.Clone(r.Keys), "METADATA", "Metadata", "ownerreferences")
	// Fragments spliced into a document's bytes: whitespace, escapes,
	// duplicate and case-folded keys, nesting.
	fragments := []string{" ", "\n", `"metadata":{"uid":"d"},`, `"uid":"z",`, `"UID":"y",`, `"x":[{"}":"]"}],`,
		`"finalizers":["f"],`, `"deletionTimestamp":null,`, `"name":"\u0061",`, `{`, `"`, `,`}
	scanned, fallback := 0, 0
	for range 2000 {
		seed := storedMetaDocs[r.IntN(len(storedMetaDocs))].doc
		b := []byte(seed)
		if r.IntN(2) == 0 {
			var v any
			if json.Unmarshal(b, &v) == nil {
				b, _ = json.Marshal(r.Mutate(v, 1+r.IntN(3)))
			}
		} else {
			for range 1 + r.IntN(2) {
				// Mostly where a member may begin, so that most documents
				// stay valid JSON.
				var after []int
				for i, c := range b {
					if c == '{' || c == ',' {
						after = append(after, i+1)
					}
				}
				i := r.IntN(len(b) + 1)
				if len(after) > 0 && r.IntN(4) != 0 {
					i = after[r.IntN(len(after))]
				}
				b = slices.Concat(b[:i], []byte(fragments[r.IntN(len(fragments))]), b[i:])
			}
		}
		if checkScanStoredMeta(t, b) {
			scanned++
		} else {
			fallback++
		}
	}
	if scanned < 200 || fallback < 200 {
		t.Errorf("scanned %d documents, left %d; want at least 200 of each", scanned, fallback)
	}
}
