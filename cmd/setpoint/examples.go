package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// loadExamples registers the example kinds and installs their plugins: it
// applies, through the API like any client, every CustomResourceDefinition in
// the YAML and JSON files under dir (recursively), then uploads the example
// plugins' modules and applies their Plugin objects (installExamplePlugins).
// Example objects are left for the walkthroughs to create. A missing
// directory (a binary run outside the repository) is logged, not an error.
func loadExamples(ctx context.Context, log *slog.Logger, dir, url string, m *serving.Material) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		log.Info("examples directory not found; no example kinds loaded", "dir", dir)
		return
	}
	if err := applyExampleKinds(ctx, log, dir, url, m); err != nil && ctx.Err() == nil {
		log.Error("load example kinds", "dir", dir, "err", err)
	}
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
	return installExamplePlugins(ctx, log, dir, cfg, c)
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
