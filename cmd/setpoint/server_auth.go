package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// authFlags are `setpoint server`'s authentication flags, named as
// kube-apiserver's.
type authFlags struct {
	tokenAuthFile string
	clientCAFile  string
	oidc          serving.OIDCOptions
}

func (o *serverOptions) addAuthFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	a := &o.auth
	f.StringVar(&a.tokenAuthFile, "token-auth-file", "", "static token `FILE` in Kubernetes' CSV format, one line per token: token,user,uid,\"group1,group2\" (the groups optional); re-read when it changes, and a version that does not parse keeps the tokens read before")
	f.StringVar(&a.clientCAFile, "client-ca-file", "", "PEM `FILE` of the CAs whose client certificates authenticate (common name the user, organizations the groups), besides the server's own CA; needed for client certificates with --tls-cert-file")
	f.StringVar(&a.oidc.IssuerURL, "oidc-issuer-url", "", "https URL of the OpenID Connect issuer whose ID tokens authenticate (its discovery document and keys are fetched from there); needs --oidc-client-id")
	f.StringVar(&a.oidc.ClientID, "oidc-client-id", "", "the audience (aud) ID tokens must be issued for")
	f.StringVar(&a.oidc.UsernameClaim, "oidc-username-claim", "sub", "the ID token claim that holds the user name")
	f.StringVar(&a.oidc.UsernamePrefix, "oidc-username-prefix", "", "prefix of every OIDC user name; when empty, names from a claim other than email get the issuer URL and #; - for none")
	f.StringVar(&a.oidc.GroupsClaim, "oidc-groups-claim", "", "the ID token claim that holds the user's groups (a string or an array of strings)")
	f.StringVar(&a.oidc.GroupsPrefix, "oidc-groups-prefix", "", "prefix of every OIDC group")
	f.StringVar(&a.oidc.CAFile, "oidc-ca-file", "", "PEM `FILE` of the CAs that sign the issuer's certificate (default: the system's roots)")
}

// validate checks the flags before anything is created: the files exist and
// parse, and the OIDC issuer is an https URL.
func (a authFlags) validate() error {
	if a.tokenAuthFile != "" {
		b, err := os.ReadFile(a.tokenAuthFile)
		if err != nil {
			return fmt.Errorf("--token-auth-file: %w", err)
		}
		if _, err := serving.ParseTokenFile(b); err != nil {
			return fmt.Errorf("--token-auth-file %s: %w", a.tokenAuthFile, err)
		}
	}
	if _, err := a.clientCAPEM(); err != nil {
		return err
	}
	if a.oidcSet() {
		if err := a.oidc.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// oidcSet tells whether any OIDC flag that needs an issuer was given.
func (a authFlags) oidcSet() bool {
	return a.oidc.IssuerURL != "" || a.oidc.ClientID != "" || a.oidc.CAFile != "" || a.oidc.GroupsClaim != ""
}

// clientCAPEM reads --client-ca-file, which must hold a certificate; nil
// without it.
func (a authFlags) clientCAPEM() ([]byte, error) {
	if a.clientCAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(a.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--client-ca-file %s: %w", a.clientCAFile, errors.New("the file holds no PEM certificate"))
	}
	return b, nil
}

// serverAuth is what the flags build: the token authenticators, in order,
// and the pool that verifies client certificates.
type serverAuth struct {
	tokens    []authenticator.Token
	clientCAs *x509.CertPool
}

// build makes the authenticators the flags ask for. The OIDC
// authenticator fetches the issuer's keys until ctx ends. material's own
// CA verifies client certificates, with --client-ca-file's.
func (a authFlags) build(ctx context.Context, log *slog.Logger, material *serving.Material) (*serverAuth, error) {
	out := &serverAuth{clientCAs: material.ClientCAs()}
	if a.tokenAuthFile != "" {
		tf, err := serving.NewTokenFile(a.tokenAuthFile, log.With("component", "token-file"))
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		out.tokens = append(out.tokens, tf)
	}
	if a.oidcSet() {
		oidc, err := serving.NewOIDC(ctx, a.oidc)
		if err != nil {
			return nil, err
		}
		out.tokens = append(out.tokens, oidc)
	}
	extra, err := a.clientCAPEM()
	if err != nil {
		return nil, err
	}
	if extra != nil {
		if out.clientCAs == nil {
			out.clientCAs = x509.NewCertPool()
		}
		out.clientCAs.AppendCertsFromPEM(extra)
	}
	return out, nil
}

// clientCertHandler serves serving.ClientCertificatesPath with s, or says
// the server cannot sign when s is nil.
func clientCertHandler(s *serving.ClientCertSigner) http.Handler {
	if s == nil {
		return serving.NoClientCertSigner
	}
	return s
}
