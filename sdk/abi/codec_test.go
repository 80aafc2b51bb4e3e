package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const widget = `{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default","uid":"u-1","labels":{"team":"a\"b"}},"spec":{"name":"gizmo","size":"small","tags":["x","y\u00e9"],"n":-1.5e3}}`

// document is what every codec in this package implements.
type document interface {
	AppendJSON([]byte) []byte
	UnmarshalJSON([]byte) error
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		in    document
		empty func() document
	}{
		{"reconcile request", &ReconcileRequest{Object: RawJSON(widget), Children: map[string][]RawJSON{"ConfigMap": {RawJSON(`{"a":1}`)}}, Attempt: 3, Config: map[string]string{"k": "v\n"}}, func() document { return &ReconcileRequest{} }},
		{"reconcile response", &ReconcileResponse{Status: RawJSON(`{"state":"Ready"}`), Children: []RawJSON{RawJSON(`{"kind":"ConfigMap"}`)}, RequeueAfter: 1500 * time.Millisecond, Events: []Event{{Type: "Normal", Reason: "Provisioned", Message: "ok"}}, Error: "e", Terminal: true}, func() document { return &ReconcileResponse{} }},
		{"admission request", &AdmissionRequest{UID: "1", Kind: GroupVersionKind{"g", "v1", "K"}, Resource: "ks", Namespace: "ns", Name: "n", Operation: Update, Object: RawJSON(widget), OldObject: RawJSON(`{}`), DryRun: true, User: UserInfo{Username: "admin", Groups: []string{"a", "b"}}, Config: map[string]string{"x": "y"}}, func() document { return &AdmissionRequest{} }},
		{"admission response", &AdmissionResponse{Allowed: false, Message: "missing label", Code: 422, Patch: RawJSON(`[{"op":"add","path":"/a","value":1}]`), Warnings: []string{"w"}}, func() document { return &AdmissionResponse{} }},
		{"finalize request", &FinalizeRequest{Object: RawJSON(widget), Attempt: 1}, func() document { return &FinalizeRequest{} }},
		{"finalize response", &FinalizeResponse{Done: true, RequeueAfter: time.Second, Events: []Event{{Type: "Warning"}}}, func() document { return &FinalizeResponse{} }},
		{"log", &LogRequest{Level: "info", Message: "hello", Attrs: map[string]string{"a": "b"}}, func() document { return &LogRequest{} }},
		{"get", &GetRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "n"}, func() document { return &GetRequest{} }},
		{"get response", &GetResponse{Object: RawJSON(widget), Found: true}, func() document { return &GetResponse{} }},
		{"list", &ListRequest{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: "a=b", Limit: 5}, func() document { return &ListRequest{} }},
		{"list response", &ListResponse{Items: []RawJSON{RawJSON(`{}`), RawJSON(`[1]`)}}, func() document { return &ListResponse{} }},
		{"event", &EmitEventRequest{Event: Event{Type: "Normal", Reason: "R", Message: "m"}, Regarding: ObjectRef{Kind: "Widget", Name: "w"}}, func() document { return &EmitEventRequest{} }},
		{"host response", &HostResponse{Error: "denied"}, func() document { return &HostResponse{} }},
		{"write create", &WriteRequest{Object: RawJSON(widget)}, func() document { return &WriteRequest{} }},
		{"write patch status", &WriteRequest{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "w1", Subresource: "status", Patch: RawJSON(`{"status":{"state":"Ready"}}`)}, func() document { return &WriteRequest{} }},
		{"write delete with preconditions", &WriteRequest{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", UID: "u-1", ResourceVersion: "42"}, func() document { return &WriteRequest{} }},
		{"written", &WriteResponse{Object: RawJSON(widget)}, func() document { return &WriteResponse{} }},
		{"write conflict", &WriteResponse{Error: "the object has been modified", Reason: "Conflict", Code: 409}, func() document { return &WriteResponse{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.in.AppendJSON(nil)
			if !json.Valid(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
			out := tt.empty()
			if err := out.UnmarshalJSON(b); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !reflect.DeepEqual(out, tt.in) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", out, tt.in)
			}
			// encoding/json goes through the same codec.
			viaStd := tt.empty()
			if err := json.Unmarshal(b, viaStd); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(viaStd, tt.in) {
				t.Fatalf("encoding/json round trip differs: %#v", viaStd)
			}
		})
	}
}

func TestDecodeAliased(t *testing.T) {
	in := (&ReconcileRequest{Object: RawJSON(widget)}).AppendJSON(nil)
	var r ReconcileRequest
	if err := r.DecodeAliased(in); err != nil {
		t.Fatal(err)
	}
	if string(r.Object) != widget {
		t.Fatalf("object = %s", r.Object)
	}
	in[len(`{"object":`)+1] = 'X'
	if r.Object[1] != 'X' {
		t.Fatal("DecodeAliased copied the object")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"not an object", `[]`},
		{"trailing data", `{} x`},
		{"bad raw", `{"status":{"a":}}`},
		{"unterminated", `{"error":"abc`},
		{"bad escape", `{"error":"\q"}`},
		{"control char", "{\"error\":\"a\x01\"}"},
		{"bad number", `{"requeueAfterMs":01}`},
		{"fraction for int", `{"requeueAfterMs":1.5}`},
		{"bad literal", `{"terminal":tru}`},
		{"missing colon", `{"error" "x"}`},
		{"deep", `{"status":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r ReconcileResponse
			if err := r.UnmarshalJSON([]byte(tt.in)); !errors.Is(err, ErrSyntax) {
				t.Fatalf("err = %v, want ErrSyntax", err)
			}
			if err := r.DecodeOwned([]byte(tt.in)); !errors.Is(err, ErrSyntax) {
				t.Fatalf("DecodeOwned: err = %v, want ErrSyntax", err)
			}
		})
	}
}

func TestUnknownMembersSkipped(t *testing.T) {
	var r ReconcileResponse
	in := `{"future":{"x":[1,2,{"y":null}]},"error":"e","terminal":true,"status":null}`
	if err := r.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	if r.Error != "e" || !r.Terminal || r.Status != nil {
		t.Fatalf("got %+v", r)
	}
}

func TestRawJSONAccessors(t *testing.T) {
	obj := RawJSON(widget)
	if got := obj.String("metadata", "labels", "team"); got != `a"b` {
		t.Errorf("label = %q", got)
	}
	if got := obj.String("spec", "size"); got != "small" {
		t.Errorf("size = %q", got)
	}
	if obj.Has("spec", "missing") || !obj.Has("spec", "tags") {
		t.Error("Has is wrong")
	}
	if v, ok := obj.Get("spec", "tags"); !ok || string(v) != `["x","y\u00e9"]` {
		t.Errorf("tags = %s %v", v, ok)
	}
	if got := (RawJSON(`{"a":{"b":42}}`)).Int("a", "b"); got != 42 {
		t.Errorf("int = %d", got)
	}
	if ref := RefOf(obj); ref != (ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Widget", Namespace: "default", Name: "w1", UID: "u-1"}) {
		t.Errorf("ref = %+v", ref)
	}
}

func TestObjectBuilder(t *testing.T) {
	o := NewObject(nil)
	o.Str("state", "Ready\t").Int("n", -3).Bool("ok", true).Raw("x", nil).
		Object("nested", func(o *Object) { o.Str("a", "b").StrMap("m", map[string]string{"z": "1", "a": "2"}) })
	got := string(o.Bytes())
	want := `{"state":"Ready\t","n":-3,"ok":true,"x":null,"nested":{"a":"b","m":{"a":"2","z":"1"}}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if string(NewObject(nil).Bytes()) != "{}" {
		t.Fatal("empty object")
	}
	if !json.Valid(NewObject(nil).Str("bad", "\xff\x00").Bytes()) {
		t.Fatal("invalid UTF-8 produced invalid JSON")
	}
}

// TestObjectTime: a timestamp is written in UTC as RFC 3339, as
// time.Format writes it, with no allocation into a buffer large enough.
func TestObjectTime(t *testing.T) {
	at := time.Date(2026, 11, 26, 23, 4, 5, 987654321, time.FixedZone("CET", 3600))
	got := string(NewObject(nil).Time("t", at).Bytes())
	want := `{"t":"` + at.UTC().Format(time.RFC3339) + `"}`
	if got != want || want != `{"t":"2026-11-26T22:04:05Z"}` {
		t.Fatalf("got %s, want %s", got, want)
	}
	buf := make([]byte, 0, 64)
	var o Object
	if n := testing.AllocsPerRun(100, func() { o.Reset(buf); o.Time("t", at).Bytes() }); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

// FuzzDecode checks that the validating scanner agrees with encoding/json on
// what is well-formed, and that the decoders never panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{widget, `{}`, `{"a":[1,2,"\ud83d\ude00"]}`, `{"status":"\u00"}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := RawJSON(b).Valid(), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		var r ReconcileResponse
		_ = r.UnmarshalJSON(b)
		var a AdmissionRequest
		_ = a.UnmarshalJSON(b)
		var rq ReconcileRequest
		if err := rq.UnmarshalJSON(b); err == nil && !json.Valid(b) {
			t.Fatalf("ReconcileRequest accepted invalid JSON %q", b)
		}
		_, _ = RawJSON(b).Get("metadata", "name")
		var hr HTTPResponse
		if err := hr.UnmarshalJSON(b); err == nil {
			// What decodes encodes and decodes to the same response.
			var again HTTPResponse
			if err := again.UnmarshalJSON(hr.AppendJSON(nil)); err != nil || !reflect.DeepEqual(hr, again) {
				t.Fatalf("HTTPResponse %q: re-decoded %+v, %v; want %+v", b, again, err, hr)
			}
		}
	})
}

func TestGetOnMalformedInput(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"`, `{"a":`, `{"a":"x`, `{"a":1,`, `{"b":{"c":[1,2}`, `"str`, `{"a\"b":1}`} {
		if _, ok := RawJSON(in).Get("a", "b"); ok {
			t.Errorf("Get(%q) found a value", in)
		}
	}
	if got := RawJSON(`{"a\"b":"v"}`).String(`a"b`); got != "v" {
		t.Errorf("escaped key: %q", got)
	}
	if got := RawJSON(`{"a":"x\ny"}`).View("a"); got != "x\ny" {
		t.Errorf("View with escapes: %q", got)
	}
	if got := RawJSON(`{"a":"plain"}`).View("a"); got != "plain" {
		t.Errorf("View: %q", got)
	}
}

func TestDecodeAliasedTakesTheLastObject(t *testing.T) {
	in := (&ReconcileRequest{Object: RawJSON(widget), Attempt: 2, Config: map[string]string{"k": "v"},
		Children: map[string][]RawJSON{"ConfigMap": {RawJSON(`{"x":"}"}`)}}}).AppendJSON(nil)
	in = append(in, " \n"...)
	var r ReconcileRequest
	if err := r.DecodeAliased(in); err != nil {
		t.Fatal(err)
	}
	if string(r.Object) != widget || r.Attempt != 2 || r.Config["k"] != "v" || string(r.Children["ConfigMap"][0]) != `{"x":"}"}` {
		t.Fatalf("got %+v", r)
	}
	a := (&AdmissionRequest{Operation: Update, Object: RawJSON(`{"new":1}`), OldObject: RawJSON(`{"old":1}`)}).AppendJSON(nil)
	var ar AdmissionRequest
	if err := ar.DecodeAliased(a); err != nil || string(ar.Object) != `{"new":1}` || string(ar.OldObject) != `{"old":1}` {
		t.Fatalf("admission: %v %+v", err, ar)
	}
}

func TestFields(t *testing.T) {
	keys := []string{"status", "metadata", "spec", "missing"}
	tests := []struct {
		name string
		in   string
		want []string // per key; "" for absent
	}{
		{"widget", widget, []string{"", `{"name":"w1","namespace":"default","uid":"u-1","labels":{"team":"a\"b"}}`,
			`{"name":"gizmo","size":"small","tags":["x","y\u00e9"],"n":-1.5e3}`, ""}},
		{"all present, any order", ` { "spec" : 1 , "status":{"a":"}"},"metadata":[{}]}`, []string{`{"a":"}"}`, `[{}]`, `1`, ""}},
		{"first of duplicates", `{"spec":1,"spec":2}`, []string{"", "", "1", ""}},
		{"escaped key", `{"sp\u0065c":true}`, []string{"", "", "true", ""}},
		{"not an object", `[1]`, []string{"", "", "", ""}},
		{"malformed", `{"spec":1,"status"`, []string{"", "", "1", ""}},
		{"empty", ``, []string{"", "", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := make([]RawJSON, len(keys))
			for i := range vals {
				vals[i] = RawJSON("stale")
			}
			RawJSON(tt.in).Fields(keys, vals)
			for i, k := range keys {
				if string(vals[i]) != tt.want[i] {
					t.Errorf("%s = %q, want %q", k, vals[i], tt.want[i])
				}
				if g, ok := RawJSON(tt.in).Get(k); json.Valid([]byte(tt.in)) && (ok != (vals[i] != nil) || string(g) != string(vals[i])) {
					t.Errorf("%s: Fields gives %q, Get gives %q %v", k, vals[i], g, ok)
				}
			}
		})
	}
}

func TestObjectBeginEnd(t *testing.T) {
	var o Object
	o.Reset(make([]byte, 0, 8))
	o.Str("a", "1").Begin("m").Str("name", "n").Begin("labels").Str("k", "v").End().End().
		Begin("empty").End().Int("n", 2).Object("f", func(o *Object) {
		o.Str("x", "y").Begin("left").Str("open", "yes") // End omitted: Object closes it
	})
	want := `{"a":"1","m":{"name":"n","labels":{"k":"v"}},"empty":{},"n":2,"f":{"x":"y","left":{"open":"yes"}}}`
	if got := string(o.Bytes()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	o.Reset(nil)
	o.Begin("a").Begin("b").Str("c", "d")
	if got := string(o.Bytes()); got != `{"a":{"b":{"c":"d"}}}` {
		t.Fatalf("Bytes does not close open members: %s", got)
	}
	if got := string(o.End().Bytes()); got != `{"a":{"b":{"c":"d"}}}` {
		t.Fatalf("End after Bytes changed the object: %s", got)
	}
}

// TestLookupsAndBuilderDoNotAllocate pins the property guests rely on:
// reading members with Fields and View and writing nested objects with
// Begin and End into a buffer with room allocate nothing.
func TestLookupsAndBuilderDoNotAllocate(t *testing.T) {
	obj := RawJSON(widget)
	keys := []string{"metadata", "spec"}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		var top [2]RawJSON
		obj.Fields(keys, top[:])
		var o Object
		o.Reset(buf)
		o.Begin("metadata").Str("name", top[0].View("name")).End().
			Begin("spec").Str("size", top[1].View("size")).End()
		if len(o.Bytes()) == 0 {
			t.Fatal("empty")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// TestDecodeAliasedReusesMaps decodes requests with different children and
// config into one request, as the guest SDK does: nothing of an earlier
// request survives, and the steady state allocates one list per kind.
func TestDecodeAliasedReusesMaps(t *testing.T) {
	first := (&ReconcileRequest{Object: RawJSON(widget), Config: map[string]string{"a": "1", "b": "2"},
		Children: map[string][]RawJSON{"ConfigMap": {RawJSON(`{"n":1}`)}, "Secret": {RawJSON(`{"n":2}`)}}}).AppendJSON(nil)
	second := (&ReconcileRequest{Object: RawJSON(`{"kind":"W"}`), Config: map[string]string{"b": "3"},
		Children: map[string][]RawJSON{"Secret": {RawJSON(`{"n":4}`), RawJSON(`[5]`)}}}).AppendJSON(nil)
	var r ReconcileRequest
	if err := r.DecodeAliased(first); err != nil {
		t.Fatal(err)
	}
	children, config := r.Children, r.Config
	if err := r.DecodeAliased(second); err != nil {
		t.Fatal(err)
	}
	want := ReconcileRequest{Object: RawJSON(`{"kind":"W"}`), Config: map[string]string{"b": "3"},
		Children: map[string][]RawJSON{"Secret": {RawJSON(`{"n":4}`), RawJSON(`[5]`)}}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("second decode:\n got %#v\nwant %#v", r, want)
	}
	if reflect.ValueOf(r.Children).Pointer() != reflect.ValueOf(children).Pointer() ||
		reflect.ValueOf(r.Config).Pointer() != reflect.ValueOf(config).Pointer() {
		t.Error("the maps were not reused")
	}
	if err := r.DecodeAliased((&ReconcileRequest{Object: RawJSON(`{}`)}).AppendJSON(nil)); err != nil || r.Children != nil || r.Config != nil {
		t.Fatalf("request without children or config: %v %#v", err, r)
	}
	steady := (&ReconcileRequest{Object: RawJSON(widget), Children: map[string][]RawJSON{"ConfigMap": {RawJSON(`{"n":1}`)}}}).AppendJSON(nil)
	if err := r.DecodeAliased(steady); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = r.DecodeAliased(steady) }); allocs != 0 {
		t.Errorf("%v allocations per decode, want 0", allocs)
	}
	// Lists of several kinds share one backing array; each is capped, so
	// a handler appending to one does not overwrite another.
	two := (&ReconcileRequest{Object: RawJSON(`{}`), Children: map[string][]RawJSON{
		"A": {RawJSON(`1`), RawJSON(`2`)}, "B": {RawJSON(`3`)}}}).AppendJSON(nil)
	for range 2 {
		if err := r.DecodeAliased(two); err != nil {
			t.Fatal(err)
		}
	}
	_ = append(r.Children["A"], RawJSON(`"x"`))
	_ = append(r.Children["B"], RawJSON(`"y"`))
	if got := fmt.Sprint(r.Children); got != "map[A:[[49] [50]] B:[[51]]]" {
		t.Errorf("children after appending = %s", got)
	}
	// Decoding a copy does not alias or reuse: the caller's maps stay.
	var owned ReconcileRequest
	if err := owned.UnmarshalJSON(first); err != nil {
		t.Fatal(err)
	}
	m := owned.Children
	if err := owned.UnmarshalJSON(second); err != nil || len(m) != 2 {
		t.Fatalf("UnmarshalJSON touched the previous map: %v %v", err, m)
	}
}

// TestWordScanning puts each byte the scanners look for at every offset of
// strings around the eight-byte word, so both the word and the byte paths
// of the encoder, skipValue, Get and View meet it.
func TestWordScanning(t *testing.T) {
	for _, special := range []string{`"`, `\`, "\n", "\x00", "\x1f", "é", "\xff", "/"} {
		for n := 0; n <= 20; n++ {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + special + strings.Repeat("b", n-at)
				enc := appendString(nil, s)
				var back string
				if err := json.Unmarshal(enc, &back); err != nil {
					t.Fatalf("appendString(%q) = %s: %v", s, enc, err)
				}
				if want := replaceInvalid(s); back != want {
					t.Fatalf("appendString(%q) decodes to %q", s, back)
				}
				doc := []byte(`{"k` + string(enc[1:len(enc)-1]) + `":[` + string(enc) + `],"v":` + string(enc) + `}`)
				if end := skipValue(doc, 0); end != len(doc) {
					t.Fatalf("skipValue(%s) = %d, want %d", doc, end, len(doc))
				}
				if got := RawJSON(doc).View("v"); got != back {
					t.Fatalf("View(v) of %s = %q, want %q", doc, got, back)
				}
				if _, ok := RawJSON(doc).Get("k" + back); !ok {
					t.Fatalf("Get of the key %q in %s failed", "k"+back, doc)
				}
			}
		}
	}
}

// FuzzScan checks the word-at-a-time scanners against encoding/json: every
// string encodes to JSON that decodes to it, and skipValue finds the end of
// every valid value.
func FuzzScan(f *testing.F) {
	for _, s := range []string{widget, `"a\"b\\"`, `{"a":"12345678\"9"}`, "\"\x7f\u2028\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		enc := appendString(nil, string(b))
		var back string
		if err := json.Unmarshal(enc, &back); err != nil || back != replaceInvalid(string(b)) {
			t.Fatalf("appendString(%q) = %s decodes to %q, %v", b, enc, back, err)
		}
		if end := skipValue(enc, 0); end != len(enc) {
			t.Fatalf("skipValue(%s) = %d, want %d", enc, end, len(enc))
		}
		if v := bytes.TrimSpace(b); len(v) > 0 && json.Valid(v) {
			if end := skipValue(v, 0); end != len(v) {
				t.Fatalf("skipValue(%s) = %d, want %d", v, end, len(v))
			}
		}
	})
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD, as appendString does.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\ufffd")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func TestParseInt(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-42", "123456789012345678", "-123456789012345678",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.5", "1e3", "-", "", "12a", "--1"} {
		want, err := strconv.ParseInt(s, 10, 64)
		got, ok := parseInt([]byte(s))
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseInt(%q) = %d, %v; strconv says %d, %v", s, got, ok, want, err)
		}
	}
}

// TestNullMembers decodes null where objects and arrays are expected,
// followed by more members: null reads as empty and consumes nothing else.
func TestNullMembers(t *testing.T) {
	in := []byte(`{"attempt":1,"children":null,"config":null,"object":{"a":1}}`)
	for _, alias := range []bool{false, true} {
		var r ReconcileRequest
		d := decoder{b: in, alias: alias}
		if err := r.decode(&d); err != nil || r.Attempt != 1 || string(r.Object) != `{"a":1}` || r.Children != nil || r.Config != nil {
			t.Errorf("request (alias %v): %v %#v", alias, err, r)
		}
	}
	var a AdmissionRequest
	err := a.UnmarshalJSON([]byte(`{"kind":null,"name":"n","userInfo":{"groups":null,"username":"u"},"config":null,"object":{}}`))
	if err != nil || a.Name != "n" || a.User.Username != "u" || string(a.Object) != `{}` {
		t.Errorf("admission: %v %#v", err, a)
	}
	var resp ReconcileResponse
	err = resp.UnmarshalJSON([]byte(`{"status":null,"children":null,"events":null,"error":"e"}`))
	if err != nil || resp.Error != "e" || resp.Status != nil || resp.Children != nil || resp.Events != nil {
		t.Errorf("response: %v %#v", err, resp)
	}
	err = resp.UnmarshalJSON([]byte(`{"children":[null,{}],"events":[null,{"type":"Normal"}],"terminal":true}`))
	if err != nil || !resp.Terminal || len(resp.Children) != 2 || string(resp.Children[1]) != `{}` ||
		len(resp.Events) != 2 || resp.Events[1].Type != "Normal" {
		t.Errorf("response with null elements: %v %#v", err, resp)
	}
}

func TestDecodeOwned(t *testing.T) {
	want := &ReconcileResponse{Status: RawJSON(`{"state":"Ready"}`), Children: []RawJSON{RawJSON(`{"kind":"ConfigMap"}`)},
		RequeueAfter: 2 * time.Second, Events: []Event{{Type: "Normal", Reason: "R"}}, Error: "e", Terminal: true}
	b := want.AppendJSON(nil)
	var r ReconcileResponse
	if err := r.DecodeOwned(b); err != nil || !reflect.DeepEqual(&r, want) {
		t.Fatalf("DecodeOwned: %v %#v", err, r)
	}
	b[len(`{"status":{"`)] = 'X'
	if r.Status[2] != 'X' {
		t.Fatal("DecodeOwned copied the status")
	}
	if allocs := testing.AllocsPerRun(50, func() { _ = r.DecodeOwned(b) }); allocs > 3 {
		t.Errorf("%v allocations per decode, want at most 3 (the lists of children and events, the error)", allocs)
	}
}

// FuzzDecodeAcceptsWhatEncodingJSONAccepts checks the decoders against
// encoding/json: a document it decodes into the same shape must decode
// here too (a null member once broke the member loop; this finds such a
// slip).
func FuzzDecodeAcceptsWhatEncodingJSONAccepts(f *testing.F) {
	for _, s := range []string{`{"attempt":1,"children":null,"config":null,"object":{}}`,
		`{"children":{"A":[null,{}],"B":null},"config":{"k":null}}`,
		`{"status":null,"children":[null],"events":[null,{"type":"x"}],"error":"e","terminal":false,"requeueAfterMs":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// A document is a JSON object. encoding/json also decodes a bare
		// null into a struct, as a no-op; the ABI refuses it by design.
		if v := bytes.TrimLeft(b, " \t\r\n"); len(v) == 0 || v[0] != '{' {
			return
		}
		var stdReq struct {
			Object   json.RawMessage              `json:"object"`
			Children map[string][]json.RawMessage `json:"children"`
			Attempt  int                          `json:"attempt"`
			Config   map[string]string            `json:"config"`
		}
		if json.Unmarshal(b, &stdReq) == nil {
			var r ReconcileRequest
			if err := r.UnmarshalJSON(b); err != nil {
				t.Fatalf("ReconcileRequest refused %q, which encoding/json decodes: %v", b, err)
			}
		}
		var stdResp struct {
			Status         json.RawMessage   `json:"status"`
			Children       []json.RawMessage `json:"children"`
			RequeueAfterMs int64             `json:"requeueAfterMs"`
			Events         []struct {
				Type, Reason, Message string
			} `json:"events"`
			Error    string `json:"error"`
			Terminal bool   `json:"terminal"`
		}
		if json.Unmarshal(b, &stdResp) == nil {
			var r ReconcileResponse
			if err := r.UnmarshalJSON(b); err != nil {
				t.Fatalf("ReconcileResponse refused %q, which encoding/json decodes: %v", b, err)
			}
			if err := r.DecodeOwned(b); err != nil {
				t.Fatalf("DecodeOwned refused %q, which encoding/json decodes: %v", b, err)
			}
		}
	})
}
