package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/munnerz/goautoneg"
	yamlv3 "go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// writeJSON writes v as JSON with code. Unstructured objects and lists are
// written as their MarshalJSON makes them (compact, HTML-escaped, ending in a
// newline): json.Marshal would only re-check and compact the same bytes.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var b []byte
	var err error
	switch o := v.(type) {
	case *unstructured.Unstructured:
		b, err = kinds.MarshalJSON(o)
	case *unstructured.UnstructuredList:
		b, err = o.MarshalJSON()
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("encode response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeJSONList writes l as the JSON of the UnstructuredList it stands for,
// copying the items as they are.
func writeJSONList(w http.ResponseWriter, l *engine.JSONList) {
	n := 128
	for _, it := range l.Items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"apiVersion":`...)
	b = objjson.AppendString(b, l.APIVersion)
	b = append(b, `,"items":[`...)
	for i, it := range l.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, `],"kind":`...)
	b = objjson.AppendString(b, l.Kind)
	b = append(b, `,"metadata":{`...)
	if l.Continue != "" { // omitted when empty, as ListMeta encodes it
		b = append(b, `"continue":`...)
		b = objjson.AppendString(b, l.Continue)
		b = append(b, ',')
	}
	b = append(b, `"resourceVersion":`...)
	b = objjson.AppendString(b, l.ResourceVersion)
	b = append(b, "}}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// streamJSONList writes a full list as writeJSONList does, a page at a time
// as the engine reads it (ListJSONPages), so that a list holds one page
// rather than the whole kind, stored and encoded: concurrent full lists of
// a large kind would otherwise hold a copy each. An error before the first
// page is returned (and written as a Status); one after it, once the
// response has started, aborts the connection, so that the client sees a
// broken response, never a short list.
func (s *Server) streamJSONList(w http.ResponseWriter, r *http.Request, t target, opts metav1.ListOptions) error {
	var kind, rv string
	started, writeFailed := false, false
	var buf []byte
	written := 0
	err := s.eng.ListJSONPages(r.Context(), t.gvr(), t.namespace, opts, s.pageSize, func(l *engine.JSONList) error {
		buf = buf[:0]
		if !started {
			started, kind, rv = true, l.Kind, l.ResourceVersion
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			buf = append(buf, `{"apiVersion":`...)
			buf = objjson.AppendString(buf, l.APIVersion)
			buf = append(buf, `,"items":[`...)
		}
		for _, it := range l.Items {
			if written > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, it...)
			written++
		}
		if _, err := w.Write(buf); err != nil {
			writeFailed = true
			return err
		}
		return nil
	})
	switch {
	case err != nil && !started:
		return err
	case err != nil && writeFailed:
		return nil // the client is gone or too slow: nobody to tell
	case err != nil:
		s.log.Warn("list failed after its response started; aborting the response", "resource", t.gvr().Resource, "err", err)
		panic(http.ErrAbortHandler)
	}
	buf = append(buf[:0], `],"kind":`...)
	buf = objjson.AppendString(buf, kind)
	buf = append(buf, `,"metadata":{"resourceVersion":`...)
	buf = objjson.AppendString(buf, rv)
	buf = append(buf, "}}\n"...)
	_, _ = w.Write(buf)
	return nil
}

// writeStatus writes a failure meta/v1 Status.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code),
		Reason: metav1.StatusReason(reason), Message: message,
	})
}

// statusOf returns the meta/v1 Status that reports err.
func statusOf(err error) metav1.Status {
	var st apierrors.APIStatus
	switch {
	case errors.As(err, &st):
	case errors.Is(err, context.DeadlineExceeded):
		// The request timeout (serving.Limit) passed, as kube-apiserver
		// reports it.
		st = apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	default:
		st = apierrors.NewInternalError(err)
	}
	out := st.Status()
	out.Kind, out.APIVersion = "Status", "v1"
	if out.Code == 0 {
		out.Code = http.StatusInternalServerError
	}
	return out
}

// writeError writes err as a Status with its code.
func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, int(st.Code), &st)
}

// acceptedTypes are the media types kube-apiserver names when it finds
// none it can answer in among a request's Accept. Setpoint answers a
// request for protobuf in JSON, as it does one that also takes JSON.
var acceptedTypes = []string{"application/json", "application/yaml", protobufType}

// negotiate refuses a resource request whose Accept names no media type
// Setpoint answers in, with the 406 Not Acceptable kube-apiserver's
// handlers answer (negotiation.NegotiateOutputMediaType). No Accept takes
// anything.
func negotiate(r *http.Request) error {
	accept := r.Header.Get("Accept")
	if accept == "" || takesJSON(accept) {
		return nil // what kubectl and client-go send: no parsing
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		if c.Type == "*" && c.SubType == "*" {
			return nil
		}
		if c.Type != "application" {
			continue
		}
		if c.SubType == "*" || slices.Contains(acceptedTypes, "application/"+c.SubType) {
			return nil
		}
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + strings.Join(acceptedTypes, ", "),
	}}
}

// takesJSON tells whether accept plainly names application/json, */* or
// application/*.
func takesJSON(accept string) bool {
	for _, t := range [...]string{"application/json", "*/*", "application/*"} {
		for rest := accept; ; {
			i := strings.Index(rest, t)
			if i < 0 {
				break
			}
			rest = rest[i+len(t):]
			if rest == "" || rest[0] == ',' || rest[0] == ';' || rest[0] == ' ' {
				return true
			}
		}
	}
	return false
}

// wantsYAML tells whether the client prefers YAML to JSON.
func wantsYAML(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if !strings.Contains(strings.ToLower(accept), "yaml") {
		return false // no media type below can be YAML's: no parsing
	}
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/yaml":
			return true
		case "application/json", "*/*", "application/*":
			return false
		}
	}
	return false
}

// acceptParams returns the parameters of the first Accept media type whose
// "as" parameter is as, or nil.
func acceptParams(r *http.Request, as string) map[string]string {
	accept := r.Header.Get("Accept")
	if !strings.Contains(accept, ";") {
		return nil // no parameters at all: no parsing
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "application/json" {
			continue
		}
		if params["as"] == as {
			return params
		}
	}
	return nil
}

// writeObject writes an API object in the format the client asked for.
func writeObject(w http.ResponseWriter, r *http.Request, code int, v any) {
	if !wantsYAML(r) {
		writeJSON(w, code, v)
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		b, err = yaml.JSONToYAML(b)
	}
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// readBody reads a request body of at most max bytes.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	size := 512
	if n := r.ContentLength; n > 0 && n < max {
		size = int(n) + 1 // room to read the end without growing
	}
	b, err := readAll(http.MaxBytesReader(w, r.Body, max), size)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", max)) // kube-apiserver's words
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The request timeout passed with the body still arriving
		// (serving.Limit cuts the read there).
		return nil, apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	return b, nil
}

// readAll is io.ReadAll starting with a buffer of size bytes.
func readAll(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// mediaType returns the media type of the request body.
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return "application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

func unsupportedMediaType(mt string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %q)", mt), 0, false)
}

// toJSON returns a JSON or YAML body as JSON, refusing bodies nested deeper
// than MaxDepth.
func toJSON(mt string, body []byte) ([]byte, error) {
	switch mt {
	case "application/json", "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json":
	case "application/yaml", "application/apply-patch+yaml":
		if err := checkYAMLDepth(body); err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid YAML: %v", err))
		}
		body = j
	default:
		return nil, unsupportedMediaType(mt)
	}
	if err := checkJSONDepth(body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeObject decodes a request body into an object.
func decodeObject(r *http.Request, body []byte) (*unstructured.Unstructured, error) {
	if mediaType(r) == protobufType {
		m, err := decodeProtobuf(body)
		if err != nil {
			return nil, err
		}
		normalizeTimes(m)
		return &unstructured.Unstructured{Object: m}, nil
	}
	j, err := toJSON(mediaType(r), body)
	if err != nil {
		return nil, err
	}
	if m, ok := objjson.Decode(j); ok {
		return &unstructured.Unstructured{Object: m}, nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON object: %v", err))
	}
	if m == nil {
		return nil, apierrors.NewBadRequest("the request body is not an object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func tooDeep() error {
	return apierrors.NewBadRequest(fmt.Sprintf("the request body nests deeper than %d levels", MaxDepth))
}

// checkJSONDepth refuses JSON nested deeper than MaxDepth, without parsing it.
func checkJSONDepth(b []byte) error {
	if objjson.Deeper(b, MaxDepth) {
		return tooDeep()
	}
	return nil
}

// maxYAMLAliases caps alias references in a YAML body ("billion laughs").
const maxYAMLAliases = 100

// checkYAMLDepth refuses YAML whose indentation or flow nesting goes deeper
// than MaxDepth (one pass over the bytes, before any parser runs), then
// parses it into nodes without expanding aliases and refuses documents that
// nest too deep or use more than maxYAMLAliases aliases.
func checkYAMLDepth(b []byte) error {
	for _, line := range bytes.Split(b, []byte("\n")) {
		indent := 0
		for indent < len(line) && (line[indent] == ' ' || line[indent] == '-') {
			indent++
		}
		if indent/2 > MaxDepth {
			return tooDeep()
		}
		flow := 0
		for _, c := range line[indent:] {
			switch c {
			case '{', '[':
				flow++
				if flow+indent/2 > MaxDepth {
					return tooDeep()
				}
			case '}', ']':
				flow--
			}
		}
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	for {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid YAML: %v", err))
		}
		aliases := 0
		if !walkYAML(&n, 0, &aliases) {
			return tooDeep()
		}
		if aliases > maxYAMLAliases {
			return apierrors.NewBadRequest(fmt.Sprintf("the request body uses more than %d YAML aliases", maxYAMLAliases))
		}
	}
}

// walkYAML counts alias nodes without following them and reports whether
// the tree stays within MaxDepth.
func walkYAML(n *yamlv3.Node, depth int, aliases *int) bool {
	if depth > MaxDepth+1 {
		return false
	}
	if n.Kind == yamlv3.AliasNode {
		*aliases++
		return true
	}
	for _, c := range n.Content {
		if !walkYAML(c, depth+1, aliases) {
			return false
		}
	}
	return true
}

func jsonMarshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return b, nil
}

// normalizeTimes drops the null creationTimestamp the typed-to-unstructured
// conversion leaves behind.
func normalizeTimes(m map[string]any) {
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
}

// writeIndentedJSON answers 200 with v as JSON indented by two spaces, as
// kube-apiserver writes /version (kubectl get --raw /version shows it as
// sent).
func writeIndentedJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "InternalError", fmt.Sprintf("encode response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
