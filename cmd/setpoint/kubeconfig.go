package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

func init() { subcommands = append(subcommands, newKubeconfigCommand) }

func newKubeconfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Write kubeconfigs for users",
		Long:  `Write kubeconfigs that let other users reach the server as themselves.`,
		Args:  noArgs,
	}
	cmd.AddCommand(newKubeconfigCreateCommand())
	return cmd
}

// kubeconfigCreateOptions are `setpoint kubeconfig create`'s flags.
type kubeconfigCreateOptions struct {
	client     clientOptions
	groups     []string
	expiration time.Duration
	output     string
}

func newKubeconfigCreateCommand() *cobra.Command {
	o := &kubeconfigCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create USER",
		Short: "Write a kubeconfig with a new client certificate for USER",
		Long: `Write a kubeconfig in which USER authenticates with a client certificate the
server's CA signs: a fresh private key is made here and never leaves this
machine; the server signs a certificate request for it (user name in the
common name, groups in the organizations, as Kubernetes reads client
certificates) if the caller may create clientcertificates in the group
setpoint.dev, which the admin may. The kubeconfig holds the server's URL and
CA, the certificate and the key; give it to USER and bind USER, or one of the
groups, to a Role.

A certificate cannot be revoked before it expires: keep --expiration short for
users who may leave.

` + exitCodeHelp,
		Example: `  setpoint kubeconfig create alice --group dev -o alice.kubeconfig
  KUBECONFIG=alice.kubeconfig kubectl auth whoami

  # A day-long certificate
  setpoint kubeconfig create ci --expiration 24h -o ci.kubeconfig`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageError("want exactly one USER, such as: setpoint kubeconfig create alice -o alice.kubeconfig")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKubeconfigCreate(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	f := cmd.Flags()
	f.StringArrayVar(&o.groups, "group", nil, "a `GROUP` the user is in; repeat for several")
	f.DurationVar(&o.expiration, "expiration", serving.DefaultClientCertValidity, "how long the certificate is valid (at least 10m; never past the server CA's own expiry)")
	f.StringVarP(&o.output, "output", "o", "", "write the kubeconfig to `FILE` (mode 0600) instead of standard output")
	return cmd
}

func runKubeconfigCreate(ctx context.Context, o *kubeconfigCreateOptions, name string, stdout io.Writer) error {
	if o.expiration < serving.MinClientCertValidity {
		return usageError("--expiration %v: want at least %v", o.expiration, serving.MinClientCertValidity)
	}
	for _, g := range o.groups {
		if strings.TrimSpace(g) == "" {
			return usageError("--group: a group name is empty")
		}
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: name, Organization: slices.Clone(o.groups)},
	}, key)
	if err != nil {
		return fmt.Errorf("certificate request: %w", err)
	}
	seconds := int64(o.expiration / time.Second)
	req := serving.ClientCertificate{
		TypeMeta: metav1.TypeMeta{APIVersion: serving.ClientCertificateAPIVersion, Kind: serving.ClientCertificateKind},
		Spec: serving.ClientCertificateSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}),
			ExpirationSeconds: &seconds,
		},
	}
	certPEM, err := askClientCertificate(ctx, c.config, &req)
	if err != nil {
		return c.explain(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	data, err := userKubeconfig(c.config, name, certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return err
	}
	if o.output == "" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(o.output, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	// WriteFile keeps the mode of a file that exists.
	return os.Chmod(o.output, 0o600)
}

// askClientCertificate posts req and returns the signed certificate.
func askClientCertificate(ctx context.Context, cfg *rest.Config, req *serving.ClientCertificate) ([]byte, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client: %w", err)
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cfg.Host, "/")+serving.ClientCertificatesPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", cfg.UserAgent)
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		var st metav1.Status
		if json.Unmarshal(out, &st) == nil && st.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost,
			schema.GroupResource{Group: "setpoint.dev", Resource: "clientcertificates"}, "", strings.TrimSpace(string(out)), 0, false)
	}
	var got serving.ClientCertificate
	if err := json.Unmarshal(out, &got); err != nil || len(got.Status.Certificate) == 0 {
		return nil, fmt.Errorf("the server's answer holds no certificate")
	}
	return got.Status.Certificate, nil
}

// userKubeconfig is a kubeconfig for cfg's server (its URL and CA) in
// which name authenticates with the client certificate and key.
func userKubeconfig(cfg *rest.Config, name string, certPEM, keyPEM []byte) ([]byte, error) {
	caData := cfg.TLSClientConfig.CAData
	if len(caData) == 0 && cfg.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(cfg.TLSClientConfig.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the server's CA: %w", err)
		}
		caData = b
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[serving.KubeconfigCluster] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: caData,
		InsecureSkipTLSVerify:    cfg.TLSClientConfig.Insecure,
	}
	out.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	context := name + "@" + serving.KubeconfigCluster
	out.Contexts[context] = &clientcmdapi.Context{Cluster: serving.KubeconfigCluster, AuthInfo: name, Namespace: "default"}
	out.CurrentContext = context
	data, err := clientcmd.Write(*out)
	if err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	return data, nil
}
