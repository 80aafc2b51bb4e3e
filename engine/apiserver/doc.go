// Package apiserver serves Setpoint's Kubernetes-compatible REST API over an
// engine.Service it is given: the /api and /apis resource paths (namespaced,
// cluster-scoped and all-namespaces forms, the /status and /scale
// subresources), watch over chunked HTTP and, with an Upgrade header, over
// WebSocket (package wswatch; both streams turn each event's object into a
// Table or a PartialObjectMetadata when the Accept header, or on a WebSocket
// the accept query parameter, asks), legacy and aggregated discovery, the
// OpenAPI v2 and v3 documents built from the CRD schemas, Table responses,
// meta/v1 Status errors, /version, the probes and the web UI (package
// webui).
//
// It builds no engine and runs none of the engine's loops: the caller (cmd)
// builds the engine, gives it in Options.Engine and runs engine.Service.Run.
// Handlers of paths the engine does not serve (cmd's module upload, the
// Plugins' log subresource, the snapshot endpoint) are given as
// Options.Routes and served on the same router, behind the same middleware,
// as the resource paths.
//
// It owns no authentication, TLS or metrics, and does not authorize
// requests: the serving package wraps the handler with them. It reads the
// authenticated user, when one is set, from the request context
// (k8s.io/apiserver/pkg/endpoints/request.UserFrom) and hands it to the
// engine's admission. With Options.Authorizer (behind system:masters, as
// serving.Decider chains them) it answers the access reviews
// (SubjectAccessReview, LocalSubjectAccessReview and the self reviews) and
// asks for create when server-side apply creates an object, the one
// decision a request's verb does not cover.
//
// It imports engine and nothing else of Setpoint's but its own subpackages
// (serving reads the store contract).
package apiserver
