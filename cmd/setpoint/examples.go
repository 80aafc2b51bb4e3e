package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// loadExamples registers the example kinds and installs their plugins: it
// applies, through the API like any client, every CustomResourceDefinition in
// the YAML and JSON files under dir (recursively), then uploads the example
// plugins' modules and applies their Plugin objects (installExamplePlugins).
// Example objects are left for the walkthroughs to create. A missing
// directory (a binary run outside the repository) is logged, not an error.
//
// Once the kinds are established and every Plugin is Ready, it prints the
// banner (examplesBanner) to stdout, so that the hints come when they work.
func loadExamples(ctx context.Context, log *slog.Logger, stdout io.Writer, dir, url, kubeconfig string, m *serving.Material) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		log.Info("examples directory not found; no example kinds loaded", "dir", dir)
		return
	}
	if err := applyExampleKinds(ctx, log, dir, url, m); err != nil {
		if ctx.Err() == nil {
			log.Error("load example kinds", "dir", dir, "err", err)
		}
		return
	}
	fmt.Fprint(stdout, examplesBanner(url, kubeconfig))
}

// examplesBanner is what a person who ran `make run` needs next.
func examplesBanner(url, kubeconfig string) string {
	path := "bin"
	if exe, err := os.Executable(); err == nil {
		path = filepath.Dir(exe)
	}
	return fmt.Sprintf(`examples ready: kubectl get widgets
  in another terminal: export KUBECONFIG=%s PATH=%s:$PATH
  walkthroughs:        examples/*/README.md (the kinds and plugins are installed)
  web UI:              %s/ui/ (sign in with the token: kubectl config view --raw -o jsonpath='{.users[0].user.token}')
`, shellQuote(kubeconfig), shellQuote(path), strings.TrimSuffix(url, "/"))
}

// waitPluginsReady waits until each of the named Plugins that exists is
// Ready (one whose module was not built was never created). Other Plugins
// a data directory holds from earlier runs are not waited for.
func waitPluginsReady(ctx context.Context, c *client, names []string, timeout time.Duration) error {
	// Plugins are cluster-scoped and served from the start.
	r := resource{gvr: pluginGVR, gvk: pluginGVR.GroupVersion().WithKind("Plugin")}
	ready := waitCondition{text: "condition=Ready", condType: "Ready", condStatus: "True"}
	for _, name := range names {
		if _, err := c.resourceInterface(r, "").Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			continue
		}
		if err := waitFor(ctx, c, target{r: r, name: name}, ready, timeout); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	}
	return nil
}

func applyExampleKinds(ctx context.Context, log *slog.Logger, dir, url string, m *serving.Material) error {
	ms, err := readManifests([]string{dir}, true, strings.NewReader(""))
	if err != nil {
		return err
	}
	var crds []manifest
	for _, mf := range ms {
		if applyRank(mf.obj) == 0 {
			crds = append(crds, mf)
		}
	}
	if len(crds) == 0 {
		log.Info("no CustomResourceDefinitions among the examples", "dir", dir)
		return nil
	}
	cfg := &rest.Config{Host: url, BearerToken: m.Token, Timeout: 30 * time.Second, UserAgent: "setpoint-server/" + version}
	cfg.TLSClientConfig.CAData = m.CAData
	c, err := newClient(cfg, "default")
	if err != nil {
		return err
	}
	if err := waitReady(ctx, cfg); err != nil {
		return err
	}
	var names []string
	for _, mf := range crds {
		res, err := applyOne(ctx, c, mf, nil, &applyOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", mf.where(), err)
		}
		log.Info("example kind applied", "name", mf.obj.GetName(), "result", res.result, "file", mf.source)
		names = append(names, mf.obj.GetName())
	}
	if err := waitEstablished(ctx, c, names, time.Minute); err != nil {
		return err
	}
	if err := installExamplePlugins(ctx, log, dir, cfg, c); err != nil {
		return err
	}
	return waitPluginsReady(ctx, c, examplePluginNames(dir), 2*time.Minute)
}

// examplePluginNames are the names of the Plugins the examples under dir
// define (in their plugin.yaml.tmpl).
func examplePluginNames(dir string) []string {
	var names []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != examplePluginTemplate {
			return err
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		ms, err := parseManifests(p, text)
		if err != nil {
			return nil
		}
		for _, m := range ms {
			names = append(names, m.obj.GetName())
		}
		return nil
	})
	return names
}

// waitReady polls /readyz until it answers 200, for at most a minute.
func waitReady(ctx context.Context, cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("HTTP client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w", ctx.Err())
		}
	}
}
