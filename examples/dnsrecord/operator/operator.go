// Package operator is the logic of the DNSRecord plugin
// (examples/dnsrecord/plugin): it keeps a record in an external DNS
// service (examples/dnsrecord/fakedns stands in for one) as each DNSRecord
// object says, through the host's egress call (sdk/plugin.HTTP), authenticated with a token
// read from a Secret. It is the actuation pattern of docs/PLUGINS.md:
//
//   - level-triggered: every reconcile reads the record from the service
//     and compares it with the spec, whatever changed; nothing is
//     remembered between calls but what the object's status holds;
//   - idempotent: it finds the record (by the ID in status, then by name
//     and type) before it creates one, and a create the service refuses
//     because the record exists adopts that record, so that a lost
//     response or a lost status write never creates a second one;
//   - drift is repaired: a record someone changed behind the plugin's back
//     is written back on the next periodic resync (config resyncPeriod);
//   - reads of an eventually consistent service can be stale: a record
//     whose version is older than the one the plugin wrote is checked
//     again shortly, not "repaired";
//   - errors (a 500, a refused token, a denied egress call) are returned,
//     so that the engine retries with backoff and Ready says what failed;
//   - the finalizer deletes the external record before the object goes,
//     and a record already gone (404) is fine.
//
// It is plain Go on the SDK's types, unit-tested natively against the fake
// service (sdk/plugintest's Host sends the egress calls with an
// http.Client); the plugin's main package only registers it with the
// guest glue.
package operator

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// The kind the plugin reconciles.
const (
	APIVersion = "example.setpoint.dev/v1"
	Kind       = "DNSRecord"
)

// Keys of the Plugin's spec.config, which the platform's administrator
// sets along with the egress grant: the object's author chooses the
// record, not where it is written or with which credentials.
const (
	// ConfigEndpoint is the service's base URL, as the egress grant
	// allows it ("http://127.0.0.1:8053").
	ConfigEndpoint = "endpoint"
	// ConfigCredentials names the Secret that holds the service's token:
	// "namespace/name", or "name" for a Secret in each record's namespace.
	ConfigCredentials = "credentialsSecret"
	// ConfigCredentialsKey is the key of the token in the Secret's data
	// (default "token").
	ConfigCredentialsKey = "credentialsKey"
	// ConfigResyncPeriod is how often a record in sync is read again to
	// catch drift (a Go duration, default DefaultResyncPeriod).
	ConfigResyncPeriod = "resyncPeriod"
)

// Defaults.
const (
	DefaultCredentialsKey = "token"
	DefaultResyncPeriod   = time.Minute
	// StaleRecheck is how soon a record read back older than the plugin's
	// own last write is read again.
	StaleRecheck = time.Second
)

// ErrConfig reports a Plugin configuration the plugin cannot work with.
var ErrConfig = errors.New("plugin config")

// Operator holds the plugin's handlers. It keeps nothing between calls:
// what it knows of the outside world is in each object's status.
type Operator struct{}

// Handlers returns the handlers to register with the SDK's glue.
func (op *Operator) Handlers() plugin.Handlers {
	return plugin.Handlers{Reconcile: op.Reconcile, Finalize: op.Finalize}
}

// Spec is a DNSRecord's spec.
type Spec struct {
	Zone  string `json:"zone"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	TTL   int64  `json:"ttl"`
}

// Status is a DNSRecord's status as the plugin writes it (the engine adds
// observedGeneration and the Ready condition).
type Status struct {
	// ExternalID is the record's ID in the service.
	ExternalID string `json:"externalID,omitempty"`
	// ExternalVersion is the newest version of the record the plugin
	// wrote or saw; a read that shows an older one is stale.
	ExternalVersion int64 `json:"externalVersion,omitempty"`
	// SyncedGeneration is the generation whose spec the record last
	// matched: a difference found at that generation is drift, at a later
	// one a new spec. A failure in between (a 500) does not change it.
	SyncedGeneration int64       `json:"syncedGeneration,omitempty"`
	Conditions       []Condition `json:"conditions,omitempty"`
}

// DNSRecord is the object the plugin reconciles, as far as it reads it.
type DNSRecord struct {
	Metadata struct {
		Name       string `json:"name"`
		Namespace  string `json:"namespace"`
		UID        string `json:"uid"`
		Generation int64  `json:"generation"`
	} `json:"metadata"`
	Spec   Spec   `json:"spec"`
	Status Status `json:"status"`
}

// config is the Plugin's configuration, checked.
type config struct {
	endpoint     string
	secretNS     string // "" for the record's namespace
	secretName   string
	secretKey    string
	resyncPeriod time.Duration
}

func configOf(m map[string]string) (config, error) {
	c := config{
		endpoint:     strings.TrimSuffix(m[ConfigEndpoint], "/"),
		secretKey:    m[ConfigCredentialsKey],
		resyncPeriod: DefaultResyncPeriod,
	}
	if !strings.HasPrefix(c.endpoint, "http://") && !strings.HasPrefix(c.endpoint, "https://") {
		return c, fmt.Errorf("%w: %s %q is not an http:// or https:// URL", ErrConfig, ConfigEndpoint, m[ConfigEndpoint])
	}
	ref := m[ConfigCredentials]
	ns, name, hasNS := strings.Cut(ref, "/")
	if !hasNS {
		ns, name = "", ref
	}
	if name == "" || (hasNS && ns == "") || strings.Contains(name, "/") {
		return c, fmt.Errorf("%w: %s %q does not name a Secret (NAMESPACE/NAME or NAME)", ErrConfig, ConfigCredentials, ref)
	}
	c.secretNS, c.secretName = ns, name
	if c.secretKey == "" {
		c.secretKey = DefaultCredentialsKey
	}
	if s := m[ConfigResyncPeriod]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%w: %s %q is not a positive duration", ErrConfig, ConfigResyncPeriod, s)
		}
		c.resyncPeriod = d
	}
	return c, nil
}

func decode(raw abi.RawJSON) (*DNSRecord, error) {
	var r DNSRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode DNSRecord: %w", err)
	}
	return &r, nil
}

// connect reads the token from the Secret the config names and returns
// the service client. The token goes into the Authorization header and
// nowhere else: no log, event, status or error carries it.
func (op *Operator) connect(h plugin.Host, c config, namespace string) (*service, error) {
	ns := c.secretNS
	if ns == "" {
		ns = namespace
	}
	where := fmt.Sprintf("credentials: Secret %s/%s", ns, c.secretName)
	obj, found, err := h.Get(abi.GetRequest{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: c.secretName})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w (the Plugin needs spec.permissions.read: [secrets])", where, err)
	case !found:
		return nil, fmt.Errorf("%s not found", where)
	}
	enc := obj.String("data", c.secretKey)
	if enc == "" {
		return nil, fmt.Errorf("%s has no key %q", where, c.secretKey)
	}
	tok, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%s: key %q is not base64", where, c.secretKey)
	}
	token := strings.TrimSpace(string(tok))
	if token == "" {
		return nil, fmt.Errorf("%s: key %q is empty", where, c.secretKey)
	}
	return &service{h: h, base: c.endpoint, token: token}, nil
}
