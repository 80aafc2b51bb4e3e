package plugins

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// EgressSpec is a Plugin's spec.egress: the outside URLs its module may
// call over HTTP (the http host function, and Extism's http_request). No
// spec.egress grants nothing.
type EgressSpec struct {
	// Allow are the grants: a URL pattern (scheme, host or *.domain, port)
	// and the methods it allows.
	Allow []EgressAllow `json:"allow,omitempty"`
	// Timeout bounds one call, as a Go duration; the plugin's call deadline
	// bounds it too.
	Timeout string `json:"timeout,omitempty"`
	// MaxResponseBytes caps a response body. Default 1 MiB.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// Concurrency caps the calls in flight. Default 4.
	Concurrency int `json:"concurrency,omitempty"`
	// RatePerSecond and Burst limit the calls' rate (a token bucket);
	// zero means no limit.
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
	Burst         int     `json:"burst,omitempty"`
	// CABundle are PEM certificates that replace the system roots.
	CABundle string `json:"caBundle,omitempty"`
}

// EgressAllow is one grant of spec.egress.allow.
type EgressAllow struct {
	URL     string   `json:"url"`
	Methods []string `json:"methods"`
}

// EgressConfig is the egress part of a plugin's host configuration; its
// fields are those of the host's Egress.
type EgressConfig struct {
	Allow            []abi.EgressRule
	Timeout          time.Duration
	MaxResponseBytes int64
	Concurrency      int
	RatePerSecond    float64
	Burst            int
	CABundle         []byte
}

// egressMethods are the methods a grant may name.
var egressMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Bounds of spec.egress.
const (
	maxEgressResponseBytes = 16 << 20
	maxEgressConcurrency   = 256
	maxEgressRules         = 64
)

// config checks the spec and returns the host's configuration; each error
// names its field. callTimeout, when set, caps the timeout.
func (e *EgressSpec) config(callTimeout time.Duration) (*EgressConfig, field.ErrorList) {
	path := field.NewPath("spec", "egress")
	var errs field.ErrorList
	cfg := &EgressConfig{MaxResponseBytes: e.MaxResponseBytes, Concurrency: e.Concurrency,
		RatePerSecond: e.RatePerSecond, Burst: e.Burst}
	if len(e.Allow) > maxEgressRules {
		errs = append(errs, field.TooMany(path.Child("allow"), len(e.Allow), maxEgressRules))
	}
	for i, a := range e.Allow {
		p := path.Child("allow").Index(i)
		r, err := abi.ParseEgressURL(a.URL)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("url"), a.URL, err.Error()))
			continue
		}
		if len(a.Methods) == 0 {
			errs = append(errs, field.Required(p.Child("methods"), fmt.Sprintf("name the methods %s may be called with (%s)", a.URL, strings.Join(egressMethods, ", "))))
			continue
		}
		for j, m := range a.Methods {
			u := strings.ToUpper(m)
			if !slices.Contains(egressMethods, u) {
				errs = append(errs, field.NotSupported(p.Child("methods").Index(j), m, egressMethods))
				continue
			}
			if !slices.Contains(r.Methods, u) {
				r.Methods = append(r.Methods, u)
			}
		}
		cfg.Allow = append(cfg.Allow, r)
	}
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			errs = append(errs, field.Invalid(path.Child("timeout"), e.Timeout, "not a positive duration (e.g. 2s)"))
		}
		if callTimeout > 0 && d > callTimeout {
			d = callTimeout
		}
		cfg.Timeout = d
	}
	if e.MaxResponseBytes < 0 || e.MaxResponseBytes > maxEgressResponseBytes {
		errs = append(errs, field.Invalid(path.Child("maxResponseBytes"), e.MaxResponseBytes, fmt.Sprintf("must be 0 (1 MiB) to %d", maxEgressResponseBytes)))
	}
	if e.Concurrency < 0 || e.Concurrency > maxEgressConcurrency {
		errs = append(errs, field.Invalid(path.Child("concurrency"), e.Concurrency, fmt.Sprintf("must be 0 (4) to %d", maxEgressConcurrency)))
	}
	if e.RatePerSecond < 0 {
		errs = append(errs, field.Invalid(path.Child("ratePerSecond"), e.RatePerSecond, "must not be negative"))
	}
	if e.Burst < 0 {
		errs = append(errs, field.Invalid(path.Child("burst"), e.Burst, "must not be negative"))
	}
	if e.CABundle != "" {
		if err := checkPEM([]byte(e.CABundle)); err != nil {
			errs = append(errs, field.Invalid(path.Child("caBundle"), "(PEM)", err.Error()))
		}
		cfg.CABundle = []byte(e.CABundle)
	}
	return cfg, errs
}

// checkPEM reports why b is not a bundle of PEM certificates.
func checkPEM(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a %s block; only CERTIFICATE blocks belong in a CA bundle", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("holds no PEM certificate")
	}
	return nil
}

// validateEgress refuses the creation or update of a Plugin whose
// spec.egress is malformed, naming each bad entry.
func validateEgress(req *engine.AdmissionRequest) error {
	if req.Resource.GroupResource() != Resource.GroupResource() || req.Subresource != "" || req.Object == nil ||
		(req.Operation != engine.OpCreate && req.Operation != engine.OpUpdate) {
		return nil
	}
	sp, err := specOf(req.Object)
	if err != nil || sp.Egress == nil {
		return nil // a spec that does not decode is refused on its own
	}
	if _, errs := sp.Egress.config(0); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: Group, Kind: Kind}, req.Name, errs)
	}
	return nil
}
