// Package serving owns what stands between the network and Setpoint's API
// handler: the security material kept in the data directory (a CA, a serving
// certificate, the admin bearer token and the admin kubeconfig),
// authentication, impersonation, authorization, the audit log (audit.k8s.io/v1
// policy and events, also for writes made inside the server:
// Auditor.AuditWrite), Prometheus metrics, request logging and panic
// recovery.
//
// Authentication is a union of Kubernetes' request authenticators (package
// k8s.io/apiserver/pkg/authentication): client certificates the server's
// CA (or a client CA) signed, then bearer tokens in the Authorization header
// or the WebSocket bearer subprotocol, checked against the admin token and
// then the token authenticators the caller adds (a static token file,
// ServiceAccount tokens, OIDC ID tokens). Impersonation is Kubernetes'
// filter, asking the caller's authorizer for the verb impersonate. The
// server's CA also signs client certificates for users (ClientCertSigner);
// its key never leaves the server.
//
// A long-running request may detach its connection from its handler
// (Detach, with HandlerOptions.Detached): a WebSocket watch hands its
// upgraded connection to goroutines of its own and its handler returns, so
// that an idle watch holds neither the HTTP server's goroutine nor its
// buffers; the layers above count the request until the connection ends
// (its watch slot, the in-flight gauge, its metrics and log line, its audit
// ResponseComplete event), and Detached.Shutdown ends such connections.
//
// HTTP/2 is served by x/net's server (ConfigureHTTP2) with a write
// scheduler of its own (NewWriteScheduler) whose cost per frame does not
// grow with the streams a connection holds open: a client-go process puts
// up to 250 watches on one connection.
//
// It knows nothing of objects, kinds or stores: it wraps any http.Handler. It
// must not import the store backends, the plugin host or cmd.
//
// The CA, the serving certificate and the admin token live in the server's
// store under IdentityKey (PrepareStored), so that every server on one store
// has the same identity; the data directory keeps a copy of them for the
// user, and the admin kubeconfig. Files in the data directory (all 0600,
// directories 0700):
//
//	DIR/pki/ca.crt, DIR/pki/ca.key          the CA, created once
//	DIR/pki/serving.crt, DIR/pki/serving.key the serving certificate, re-issued by
//	                                         the same CA when the hosts change or
//	                                         it nears expiry
//	DIR/admin.token                          the admin bearer token
//	DIR/admin.kubeconfig                     server URL, CA data and token
package serving
