package apiserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openapiCache holds the OpenAPI documents built for one generation of the
// engine's registry.
type openapiCache struct {
	generation int64
	v2JSON     []byte
	v2Proto    []byte
	v3         map[string][]byte // by path, "apis/{group}/{version}"
	v3Hash     map[string]string
	err        error
}

const protoV2Type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// documents returns the OpenAPI documents of the current registry, built
// from the CRDs' schemas with the apiextensions builder and cached until a
// CRD changes.
func (s *Server) documents() *openapiCache {
	gen := s.eng.Generation()
	s.openapiMu.Lock()
	defer s.openapiMu.Unlock()
	if s.openapi != nil && s.openapi.generation == gen {
		return s.openapi
	}
	c := &openapiCache{generation: gen, v3: map[string][]byte{}, v3Hash: map[string]string{}}
	c.err = buildOpenAPI(s.eng.CRDs(), c)
	s.openapi = c
	return c
}

func buildOpenAPI(crds []*apiextensionsv1.CustomResourceDefinition, c *openapiCache) error {
	var v2 []*spec.Swagger
	v3 := map[schema.GroupVersion][]*spec3.OpenAPI{}
	byCRD := map[schema.GroupVersion]bool{} // served built-in kinds' CRDs
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			sw, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true, StripValueValidation: true, StripNullable: true})
			if err != nil {
				return fmt.Errorf("openapi v2 of %s %s: %w", crd.Name, v.Name, err)
			}
			v2 = append(v2, sw)
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			if describedByCRD(crd, v.Name) {
				byCRD[gv] = true
				continue
			}
			o3, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
			if err != nil {
				return fmt.Errorf("openapi v3 of %s %s: %w", crd.Name, v.Name, err)
			}
			v3[gv] = append(v3[gv], o3)
		}
	}
	builtins, err := builtinDocuments()
	if err != nil {
		return err
	}
	for gv, o3 := range builtins.docs {
		if builtins.byCRD[gv] && !byCRD[gv] {
			continue
		}
		v3[gv] = append([]*spec3.OpenAPI{o3}, v3[gv]...)
	}
	static := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Setpoint", Version: "v1.32.0"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
	merged, err := builder.MergeSpecs(static, v2...)
	if err != nil {
		return fmt.Errorf("merge openapi v2: %w", err)
	}
	if c.v2JSON, err = json.Marshal(merged); err != nil {
		return fmt.Errorf("encode openapi v2: %w", err)
	}
	doc, err := openapi_v2.ParseDocument(c.v2JSON)
	if err != nil {
		return fmt.Errorf("openapi v2 to protobuf: %w", err)
	}
	if c.v2Proto, err = proto.Marshal(doc); err != nil {
		return fmt.Errorf("encode openapi v2 protobuf: %w", err)
	}
	for gv, specs := range v3 {
		m, err := builder.MergeSpecsV3(specs...)
		if err != nil {
			return fmt.Errorf("merge openapi v3 of %s: %w", gv, err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode openapi v3 of %s: %w", gv, err)
		}
		p := "apis/" + gv.String()
		if gv.Group == "" {
			p = "api/" + gv.Version
		}
		sum := sha512.Sum512(b)
		c.v3[p], c.v3Hash[p] = b, strings.ToUpper(hex.EncodeToString(sum[:]))
	}
	return nil
}

func (s *Server) serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	c := s.documents()
	if c.err != nil {
		writeError(w, apierrors.NewInternalError(c.err))
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "protobuf") {
		w.Header().Set("Content-Type", protoV2Type)
		_, _ = w.Write(c.v2Proto)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(c.v2JSON)
}

// v3Index is the OpenAPI v3 discovery document.
type v3Index struct {
	Paths map[string]v3Path `json:"paths"`
}

type v3Path struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

func (s *Server) serveOpenAPIV3Index(w http.ResponseWriter, r *http.Request) {
	c := s.documents()
	if c.err != nil {
		writeError(w, apierrors.NewInternalError(c.err))
		return
	}
	idx := v3Index{Paths: map[string]v3Path{}}
	keys := make([]string, 0, len(c.v3))
	for p := range c.v3 {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		idx.Paths[p] = v3Path{ServerRelativeURL: "/openapi/v3/" + p + "?hash=" + c.v3Hash[p]}
	}
	writeJSON(w, http.StatusOK, idx)
}

func (s *Server) serveOpenAPIV3(w http.ResponseWriter, r *http.Request) {
	c := s.documents()
	if c.err != nil {
		writeError(w, apierrors.NewInternalError(c.err))
		return
	}
	p := chi.URLParam(r, "*")
	b, ok := c.v3[p]
	if !ok {
		writeError(w, notFoundResource())
		return
	}
	if r.URL.Query().Get("hash") == c.v3Hash[p] {
		w.Header().Set("Cache-Control", "public, immutable")
	}
	w.Header().Set("Etag", `"`+c.v3Hash[p]+`"`)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
