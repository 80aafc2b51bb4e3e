package serving

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/felixge/httpsnoop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	// auditBodyLimit is the largest request or response body an audit
	// event holds (a request body may be twice the largest object); a
	// larger one is left out, and the event says so in the annotation
	// auditOmittedAnnotation.
	auditBodyLimit = 4 << 20
	// auditStatusLimit is how much of an error response is kept to read
	// its Status from, at levels below RequestResponse.
	auditStatusLimit = 64 << 10
	// auditOmittedAnnotation names the bodies left out of an event for
	// their size.
	auditOmittedAnnotation = "audit.setpoint.dev/omitted"
)

// auditSerializer writes request and response objects into events as
// they are, JSON.
var auditSerializer = runtime.NewSimpleNegotiatedSerializer(runtime.SerializerInfo{
	MediaType:  runtime.ContentTypeJSON,
	Serializer: kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nil, nil, kjson.SerializerOptions{}),
})

// bodies records the request's and the response's bodies in its audit
// event, as kube-apiserver's handlers do with audit.LogRequestObject,
// LogRequestPatch and LogResponseObject: the object a request sends fills
// in the event's objectRef (a create's name) from Metadata up and is the
// requestObject from Request up; the response's Status is the
// responseStatus, and the response is the responseObject at
// RequestResponse. Only JSON (and YAML, turned into JSON) and protobuf
// request bodies and JSON responses are recorded, and none of long-running
// requests.
func (a *Auditor) bodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ac := audit.AuditContextFrom(ctx)
		level := ac.GetEventLevel()
		info, _ := request.RequestInfoFrom(ctx)
		if ac == nil || level.Less(auditinternal.LevelMetadata) || info == nil || LongRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		if readable(r.Header.Get("Content-Type")) && r.Body != nil && r.Body != http.NoBody {
			a.requestBody(r, info)
		}
		limit := auditStatusLimit
		if level == auditinternal.LevelRequestResponse {
			limit = auditBodyLimit
		}
		c := &capture{limit: limit}
		next.ServeHTTP(c.wrap(w), r)
		c.record(r, info, level)
	})
}

// protobufType is the media type typed Kubernetes clients (kubectl create
// namespace, client-go clientsets) send built-in objects in.
const protobufType = "application/vnd.kubernetes.protobuf"

// protobufDecoder decodes the built-in objects typed clients send.
var protobufDecoder = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// readable tells whether a body of this content type is recorded.
func readable(contentType string) bool {
	return strings.Contains(contentType, "json") || strings.Contains(contentType, "yaml") || strings.HasPrefix(contentType, protobufType)
}

// requestBody reads r's body (putting it back for the handler) and logs it.
func (a *Auditor) requestBody(r *http.Request, info *request.RequestInfo) {
	ctx := r.Context()
	body, err := io.ReadAll(io.LimitReader(r.Body, auditBodyLimit+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil {
		return
	}
	if len(body) > auditBodyLimit {
		audit.AddAuditAnnotation(ctx, auditOmittedAnnotation, "requestObject")
		return
	}
	gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	if strings.HasPrefix(r.Header.Get("Content-Type"), protobufType) {
		obj, gvk, err := protobufDecoder.Decode(body, nil, nil)
		if err != nil {
			return
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		audit.LogRequestObject(ctx, obj, gv, gv.WithResource(info.Resource), info.Subresource, auditSerializer)
		return
	}
	body = asJSON(body)
	if body == nil {
		return
	}
	if r.Method == http.MethodPatch {
		audit.LogRequestPatch(ctx, body)
		return
	}
	if audit.AuditContextFrom(ctx).GetEventLevel().Less(auditinternal.LevelRequest) {
		// Only the object's name and such go in the event: decode and
		// encode no more.
		var m metav1.PartialObjectMetadata
		if err := json.Unmarshal(body, &m); err != nil {
			return
		}
		audit.LogRequestObject(ctx, &m, gv, gv.WithResource(info.Resource), info.Subresource, auditSerializer)
		return
	}
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body)
	if err != nil {
		audit.LogRequestPatch(ctx, body) // a body without a kind, as it came
		return
	}
	audit.LogRequestObject(ctx, obj, gv, gv.WithResource(info.Resource), info.Subresource, auditSerializer)
}

// asJSON returns body as JSON (YAML is converted), or nil when it is
// neither.
func asJSON(body []byte) []byte {
	if json.Valid(body) {
		return body
	}
	j, err := yaml.YAMLToJSON(body)
	if err != nil || !json.Valid(j) {
		return nil
	}
	return j
}

// capture keeps the start of a response, up to limit bytes.
type capture struct {
	limit    int
	code     int
	buf      bytes.Buffer
	over     bool
	hijacked bool
	header   http.Header
}

func (c *capture) wrap(w http.ResponseWriter) http.ResponseWriter {
	c.header = w.Header()
	return httpsnoop.Wrap(w, httpsnoop.Hooks{
		WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
			return func(code int) {
				if c.code == 0 {
					c.code = code
				}
				next(code)
			}
		},
		Write: func(next httpsnoop.WriteFunc) httpsnoop.WriteFunc {
			return func(b []byte) (int, error) {
				c.keep(b)
				return next(b)
			}
		},
		ReadFrom: func(next httpsnoop.ReadFromFunc) httpsnoop.ReadFromFunc {
			return func(src io.Reader) (int64, error) {
				return next(io.TeeReader(src, writerFunc(func(b []byte) (int, error) { c.keep(b); return len(b), nil })))
			}
		},
		Hijack: func(next httpsnoop.HijackFunc) httpsnoop.HijackFunc {
			c.hijacked = true
			return next
		},
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (c *capture) keep(b []byte) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.over {
		return
	}
	if c.buf.Len()+len(b) > c.limit {
		c.over = true
		c.buf = bytes.Buffer{}
		return
	}
	c.buf.Write(b)
}

// record logs the response: its Status (of an error, or of a delete), and
// at RequestResponse the object.
func (c *capture) record(r *http.Request, info *request.RequestInfo, level auditinternal.Level) {
	ctx := r.Context()
	if c.hijacked || c.code == 0 || !strings.Contains(c.header.Get("Content-Type"), "json") {
		return
	}
	full := level == auditinternal.LevelRequestResponse
	if !full && c.code < 400 && info.Verb != "delete" && info.Verb != "deletecollection" {
		return
	}
	if c.over {
		if full {
			audit.AddAuditAnnotation(ctx, auditOmittedAnnotation, "responseObject")
		}
		return
	}
	body := c.buf.Bytes()
	var obj runtime.Object
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return
	}
	if kind.Kind == "Status" {
		st := &metav1.Status{}
		if err := json.Unmarshal(body, st); err != nil {
			return
		}
		obj = st
	} else if !full {
		return
	} else if u, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body); err == nil {
		obj = u
	} else {
		obj = &runtime.Unknown{Raw: body, ContentType: runtime.ContentTypeJSON}
	}
	gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	audit.LogResponseObject(ctx, obj, gv, auditSerializer)
}
