// Package serviceaccount issues and verifies ServiceAccount tokens, as
// Kubernetes' TokenRequest API and its service-account authenticator do.
//
// Keys are the signing keys (ECDSA P-256, ES256), kept in the server's store
// under a private key (KeysKey) so that every replica on one store signs
// with and verifies the same keys; rotation makes a new key current while
// the older ones still verify the tokens they signed. Issuer signs tokens
// with Kubernetes' claims (iss, sub, aud, exp, iat, nbf, jti and the
// kubernetes.io claim naming the namespace and the ServiceAccount with its
// UID). Authenticator is a k8s.io/apiserver authenticator.Token: it checks
// the signature, issuer, audience and expiry, and that the ServiceAccount
// still exists with the UID the token names, from Cache, which a watch of
// ServiceAccounts keeps current, so no request reads the store. A token
// whose signature verified is remembered until it expires, so only its
// first request pays for the signature check; the ServiceAccount's UID is
// checked on every request.
//
// The package depends on the store contract and on the engine's watch
// (through the Watcher interface it declares); nothing of the API server.
package serviceaccount
