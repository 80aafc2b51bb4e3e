package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Environment variables that name the server, the token and the CA that
// signed the server's certificate; they come after the flags and before the
// kubeconfig.
const (
	envServer = "SETPOINT_SERVER"
	envToken  = "SETPOINT_TOKEN"
	envCA     = "SETPOINT_CERTIFICATE_AUTHORITY"
)

// clientOptions are the connection flags every client verb takes.
type clientOptions struct {
	server     string
	token      string
	kubeconfig string
	context    string
	namespace  string
	caFile     string
	insecure   bool
	timeout    time.Duration
}

// addClientFlags adds the connection flags to cmd.
func addClientFlags(cmd *cobra.Command, o *clientOptions) {
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "", "server URL, https://HOST:PORT (default: $"+envServer+", then the kubeconfig)")
	f.StringVar(&o.token, "token", "", "bearer token (default: $"+envToken+", then the kubeconfig)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig `FILE`, such as DATA-DIR/admin.kubeconfig that setpoint server writes (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVar(&o.caFile, "certificate-authority", "", "PEM `FILE` of the CA that signed the server's certificate (default: $"+envCA+", then the kubeconfig's)")
	f.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "do not verify the server's certificate (unsafe)")
	f.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "how long a single request may take; 0 means no limit (watches are never cut)")
}

// addNamespaceFlag adds -n/--namespace.
func addNamespaceFlag(cmd *cobra.Command, o *clientOptions) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's, then \"default\")")
}

// client is a connection to a server: the REST configuration, a dynamic
// client and a RESTMapper fed by discovery.
type client struct {
	config     *rest.Config
	namespace  string // the namespace to use when none is given
	explicitNS bool   // namespace came from -n
	dynamic    dynamic.Interface
	discovery  discovery.CachedDiscoveryInterface
	mapper     meta.ResettableRESTMapper
}

// quietKlog silences klog once for the process: client-go reports some
// failures through klog as well as through the errors it returns; the
// errors are explained to the user, the log lines would only repeat them.
var quietKlog sync.Once

// connect resolves the connection: flags, then SETPOINT_SERVER and
// SETPOINT_TOKEN, then the kubeconfig (--kubeconfig or KUBECONFIG).
func (o *clientOptions) connect() (*client, error) {
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	server := firstNonEmpty(o.server, os.Getenv(envServer))
	token := firstNonEmpty(o.token, os.Getenv(envToken))
	caFile := firstNonEmpty(o.caFile, os.Getenv(envCA))

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	if server != "" {
		overrides.ClusterInfo.Server = server
	}
	if token != "" {
		overrides.AuthInfo.Token = token
	}
	if caFile != "" {
		overrides.ClusterInfo.CertificateAuthority = caFile
	}
	if o.insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	switch {
	case err == nil:
	case o.kubeconfig != "" && errors.Is(err, fs.ErrNotExist):
		return nil, exitError(exitUsage, fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err))
	case clientcmd.IsEmptyConfig(err) && server != "":
		cfg = &rest.Config{Host: server, BearerToken: token}
		cfg.TLSClientConfig.CAFile = caFile
		cfg.TLSClientConfig.Insecure = o.insecure
	case clientcmd.IsEmptyConfig(err) && o.kubeconfig == "" && missingKubeconfig() != "":
		return nil, exitError(exitUsage, fmt.Errorf("no server configured: KUBECONFIG=%s: the file does not exist; point KUBECONFIG at the admin.kubeconfig that `setpoint server` wrote in its data directory, or pass --server (and --token)", missingKubeconfig()))
	case clientcmd.IsEmptyConfig(err):
		return nil, exitError(exitUsage, errors.New("no server configured: pass --server (and --token), set "+envServer+" and "+envToken+
			", or point --kubeconfig or KUBECONFIG at the admin.kubeconfig that `setpoint server` wrote in its data directory"))
	default:
		return nil, exitError(exitUsage, fmt.Errorf("load kubeconfig: %w", err))
	}
	if caFile != "" {
		cfg.TLSClientConfig.CAData = nil
	}
	if o.insecure {
		cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = nil, ""
	}
	if token != "" {
		cfg.BearerTokenFile = ""
	}
	cfg.Timeout = o.timeout
	cfg.UserAgent = "setpoint/" + version
	cfg.QPS, cfg.Burst = 50, 100
	// The server's Warning headers (unknown fields dropped under
	// --validate=warn, an admission plugin's warnings, deprecated kinds) go
	// to stderr as kubectl prints them, each once.
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})

	ns := o.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	c, err := newClient(cfg, ns)
	if err != nil {
		return nil, err
	}
	c.explicitNS = o.namespace != ""
	return c, nil
}

// newClient builds the clients for cfg; namespace is the one to use when
// none is given.
func newClient(cfg *rest.Config, namespace string) (*client, error) {
	c := &client{config: cfg, namespace: namespace}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	c.discovery = memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(c.discovery)
	c.mapper = restmapper.NewShortcutExpander(mapper, c.discovery, nil).(meta.ResettableRESTMapper)
	// Watches must not be cut by the request timeout.
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	if c.dynamic, err = dynamic.NewForConfig(wcfg); err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return c, nil
}

// missingKubeconfig is $KUBECONFIG when none of the files it names exists
// (client-go skips missing ones and finds no configuration), else "".
func missingKubeconfig() string {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if env == "" {
		return ""
	}
	for _, p := range filepath.SplitList(env) {
		if _, err := os.Stat(p); err == nil {
			return ""
		}
	}
	return env
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// resource is a resolved resource argument.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
}

// qualified is how kubectl names a resource in messages: widgets.example.setpoint.dev.
func (r resource) qualified() string {
	return schema.GroupResource{Group: r.gvr.Group, Resource: r.gvr.Resource}.String()
}

// objectName is the TYPE/NAME form `-o name` prints: widget.example.setpoint.dev/foo.
func (r resource) objectName(name string) string {
	kind := strings.ToLower(r.gvk.Kind)
	if r.gvk.Group != "" {
		kind += "." + r.gvk.Group
	}
	return kind + "/" + name
}

// resolve maps a resource as a person types it — plural, singular, kind,
// short name, optionally with .group or .version.group — to what the server
// serves.
func (c *client) resolve(arg string) (resource, error) {
	r, err := c.resolveOnce(arg)
	if err != nil && meta.IsNoMatchError(err) {
		// A kind registered a moment ago: read discovery again.
		c.mapper.Reset()
		r, err = c.resolveOnce(arg)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			hint := ""
			if s := c.suggestResource(arg); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			return resource{}, exitError(exitNotFound, fmt.Errorf("the server does not serve a resource named %q%s; `setpoint kinds` lists what it serves", arg, hint))
		}
		return resource{}, c.explain(err)
	}
	return r, nil
}

func (c *client) resolveOnce(arg string) (resource, error) {
	var gvr schema.GroupVersionResource
	full, gr := schema.ParseResourceArg(arg)
	var err error
	if full != nil {
		gvr, err = c.mapper.ResourceFor(*full)
		if err != nil {
			gvr, err = c.mapper.ResourceFor(gr.WithVersion(""))
		}
	} else {
		gvr, err = c.mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return resource{}, err
	}
	return c.resourceFor(gvr)
}

func (c *client) resourceFor(gvr schema.GroupVersionResource) (resource, error) {
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return resource{}, err
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resource{}, err
	}
	return resource{gvr: m.Resource, gvk: gvk, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// resourceForKind maps an apiVersion and kind from a manifest.
func (c *client) resourceForKind(gvk schema.GroupVersionKind) (resource, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return resource{}, err
	}
	return resource{gvr: m.Resource, gvk: gvk, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// connectTo connects and resolves res, for the verbs that act on one
// object: the client, the resource and its dynamic client in the command's
// namespace.
func (o *clientOptions) connectTo(res string) (*client, resource, dynamic.ResourceInterface, error) {
	c, err := o.connect()
	if err != nil {
		return nil, resource{}, nil, err
	}
	r, err := c.resolve(res)
	if err != nil {
		return nil, resource{}, nil, err
	}
	return c, r, c.resourceInterface(r, c.namespace), nil
}

// resourceInterface is the dynamic client for r in namespace ns (ignored for
// cluster-scoped resources; "" lists all namespaces).
func (c *client) resourceInterface(r resource, ns string) dynamic.ResourceInterface {
	if r.namespaced {
		return c.dynamic.Resource(r.gvr).Namespace(ns)
	}
	return c.dynamic.Resource(r.gvr)
}

// suggestResource is the resource name, among those discovery lists
// (plural, singular, kind and short names), closest to arg: at most two
// edits away (one for a name under five letters), given as the plural;
// "" when none is that close.
func (c *client) suggestResource(arg string) string {
	name, group, _ := strings.Cut(strings.ToLower(arg), ".")
	lists, _ := c.discovery.ServerPreferredResources() // partial lists still help
	best, bestD := "", 3
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || group != "" && gv.Group != group && !strings.HasPrefix(gv.Group, group) {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // subresources
			}
			for _, n := range append([]string{r.Name, r.SingularName, strings.ToLower(r.Kind)}, r.ShortNames...) {
				if n == "" {
					continue
				}
				limit := 2 // a short name two edits away is another word
				if len(n) < 5 {
					limit = 1
				}
				if d := editDistance(name, n); d <= limit && d < bestD {
					best, bestD = r.Name, d
				}
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
