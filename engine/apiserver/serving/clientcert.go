package serving

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// ClientCertificatesPath is where a client certificate is asked for: POST a
// ClientCertificate, get it back with status.certificate. The request info
// of the path is verb create on resource clientcertificates in group
// setpoint.dev, which authorization decides.
const ClientCertificatesPath = "/apis/setpoint.dev/v1/clientcertificates"

// Client certificate lifetimes.
const (
	// DefaultClientCertValidity is a client certificate's life when the
	// request names none.
	DefaultClientCertValidity = 365 * 24 * time.Hour
	// MinClientCertValidity is the shortest life one may ask for, as for a
	// Kubernetes CertificateSigningRequest's expirationSeconds.
	MinClientCertValidity = 10 * time.Minute
	// maxCSRBytes bounds the request body.
	maxCSRBytes = 64 << 10
)

// ClientCertificate asks the server's CA for a client certificate: the
// user is the request's subject common name, its groups the subject's
// organizations, as for Kubernetes' kube-apiserver-client signer.
type ClientCertificate struct {
	metav1.TypeMeta `json:",inline"`
	Spec            ClientCertificateSpec   `json:"spec"`
	Status          ClientCertificateStatus `json:"status,omitzero"`
}

// ClientCertificateSpec is what is asked for.
type ClientCertificateSpec struct {
	// Request is a PEM "CERTIFICATE REQUEST" (PKCS #10), signed with the
	// key the certificate is for.
	Request []byte `json:"request"`
	// ExpirationSeconds is the certificate's life; a year when unset, at
	// least 600, and never past the CA's own expiry.
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
}

// ClientCertificateStatus is the answer.
type ClientCertificateStatus struct {
	// Certificate is the PEM certificate the server's CA signed.
	Certificate []byte `json:"certificate,omitempty"`
}

// ClientCertificateKind and ClientCertificateAPIVersion are a
// ClientCertificate's type.
const (
	ClientCertificateKind       = "ClientCertificate"
	ClientCertificateAPIVersion = "setpoint.dev/v1"
)

// ClientCertSigner signs client certificates with the server's CA. The CA
// key never leaves it.
type ClientCertSigner struct {
	ca  *keyPair
	now func() time.Time
}

// ClientCertSigner returns the signer of client certificates, or nil when
// the server has no CA of its own (it serves the user's certificate).
func (m *Material) ClientCertSigner() *ClientCertSigner {
	if m.ca == nil {
		return nil
	}
	return &ClientCertSigner{ca: m.ca, now: time.Now}
}

// ClientCAs returns a pool holding the server's own CA, which verifies the
// client certificates it signed; nil when it has none.
func (m *Material) ClientCAs() *x509.CertPool {
	if m.ca == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(m.ca.cert)
	return pool
}

// errBadCSR marks a request the signer refuses as the client's mistake.
var errBadCSR = errors.New("bad certificate request")

// Sign returns the PEM certificate for the PEM certificate request csrPEM,
// valid from now (less a little for clock skew) for validity (a year when
// zero), ending no later than the CA.
func (s *ClientCertSigner) Sign(csrPEM []byte, validity time.Duration) ([]byte, error) {
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if validity == 0 {
		validity = DefaultClientCertValidity
	}
	if validity < MinClientCertValidity {
		return nil, fmt.Errorf("%w: the expiration %v is shorter than %v", errBadCSR, validity, MinClientCertValidity)
	}
	notAfter := now.Add(validity)
	if notAfter.After(s.ca.cert.NotAfter) {
		notAfter = s.ca.cert.NotAfter
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: csr.Subject.CommonName, Organization: csr.Subject.Organization},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca.cert, csr.PublicKey, s.ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign client certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// parseCSR decodes and checks a PEM certificate request: its signature and a
// subject that names a user.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: spec.request holds no PEM CERTIFICATE REQUEST", errBadCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadCSR, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: the request's signature: %v", errBadCSR, err)
	}
	if csr.Subject.CommonName == "" {
		return nil, fmt.Errorf("%w: the subject's common name (the user name) is empty", errBadCSR)
	}
	if slices.Contains(csr.Subject.Organization, "") {
		return nil, fmt.Errorf("%w: a subject organization (a group) is empty", errBadCSR)
	}
	return csr, nil
}

// ServeHTTP answers POST ClientCertificatesPath: it signs the request in a
// ClientCertificate and answers 201 with the certificate in its status.
// Authorization to ask has been decided before; asking for a certificate in
// the group system:masters needs the caller to be in it too.
func (s *ClientCertSigner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		WriteStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, r.Method+" is not supported here; POST a ClientCertificate")
		return
	}
	caller, ok := request.UserFrom(r.Context())
	if !ok {
		WriteStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCSRBytes+1))
	if err != nil {
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "read the request body: "+err.Error())
		return
	}
	if len(body) > maxCSRBytes {
		WriteStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf("a ClientCertificate is at most %d bytes", maxCSRBytes))
		return
	}
	var cc ClientCertificate
	if err := json.Unmarshal(body, &cc); err != nil {
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the body is not a ClientCertificate in JSON")
		return
	}
	if cc.Kind != ClientCertificateKind || cc.APIVersion != ClientCertificateAPIVersion {
		WriteStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("the body is a %q %q, not a %s %s", cc.APIVersion, cc.Kind, ClientCertificateAPIVersion, ClientCertificateKind))
		return
	}
	var validity time.Duration
	if e := cc.Spec.ExpirationSeconds; e != nil {
		if *e < int64(MinClientCertValidity/time.Second) {
			WriteStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				fmt.Sprintf("spec.expirationSeconds %d: want at least %d", *e, int64(MinClientCertValidity/time.Second)))
			return
		}
		// The CA's expiry caps it; this only keeps the Duration in range.
		validity = time.Duration(min(*e, int64(caValidity/time.Second))) * time.Second
	}
	csr, err := parseCSR(cc.Spec.Request)
	if err != nil {
		WriteStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
		return
	}
	if slices.Contains(csr.Subject.Organization, user.SystemPrivilegedGroup) && !slices.Contains(caller.GetGroups(), user.SystemPrivilegedGroup) {
		WriteStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("User %q cannot ask for a certificate in the group %s without being in it", caller.GetName(), user.SystemPrivilegedGroup))
		return
	}
	cert, err := s.Sign(cc.Spec.Request, validity)
	if err != nil {
		if errors.Is(err, errBadCSR) {
			WriteStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
			return
		}
		WriteStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "could not sign the certificate")
		return
	}
	cc.Status.Certificate = cert
	out, _ := json.Marshal(&cc)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

// NoClientCertSigner answers ClientCertificatesPath on a server without a
// CA of its own.
var NoClientCertSigner = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	WriteStatus(w, http.StatusNotImplemented, metav1.StatusReasonMethodNotAllowed, ErrNoSigningCA.Error()+
		": the server serves the certificate of --tls-cert-file; sign client certificates with the CA of --client-ca-file")
})
