package election

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults of Options, those of client-go's leaderelection as
// kube-controller-manager uses them.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// DefaultNamespace holds the leases; it always exists.
	DefaultNamespace = "default"
)

// Client is what an elector asks of the object service: the engine's
// Service implements it. Errors are Kubernetes API status errors.
type Client interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error)
	Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error)
	Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error)
}

// Options configure Leases. Zero values get defaults in New, except Client
// and Identity, which are required.
type Options struct {
	// Client reads and writes the Lease objects. Required.
	Client Client
	// Identity names this replica in holderIdentity; unique among the
	// replicas (e.g. the host name and a random suffix). Required.
	Identity string
	// Namespace holds the leases. Default DefaultNamespace.
	Namespace string
	// Prefix is put before each elector's name to make its Lease's name.
	// Default "setpoint-".
	Prefix string
	// LeaseDuration is how long other replicas wait, after they last saw
	// the lease change, before they take it over. Default
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long a leader keeps leading without renewing the
	// lease: past it, it stops leading. Less than LeaseDuration (New lowers
	// it to two thirds of LeaseDuration otherwise). Default
	// DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to acquire and leaders try to
	// renew. Less than RenewDeadline (New lowers it to a fifth of
	// RenewDeadline otherwise). Default DefaultRetryPeriod.
	RetryPeriod time.Duration
	// Now is the clock of the times written in leases. Default time.Now.
	Now func() time.Time
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Registerer, when set, gets setpoint_leader_election_leading{lease},
	// 1 while this replica leads the lease, labelled with its identity.
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Prefix == "" {
		o.Prefix = "setpoint-"
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RenewDeadline >= o.LeaseDuration {
		o.RenewDeadline = o.LeaseDuration * 2 / 3
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.RetryPeriod >= o.RenewDeadline {
		o.RetryPeriod = o.RenewDeadline / 5
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
