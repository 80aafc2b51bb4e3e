package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/host"
)

// examplePluginTemplate is the file an example keeps its Plugin manifest in.
// The manifest names its module as digestPlaceholder; --examples fills in
// the digest of the module it uploads, and a walkthrough does the same with
// sed.
const (
	examplePluginTemplate = "plugin.yaml.tmpl"
	digestPlaceholder     = "sha256:DIGEST"
	exampleModulesPath    = "/apis/setpoint.dev/v1alpha1/modules"
)

// installExamplePlugins uploads the module of every example that has a
// plugin (DIR/EXAMPLE/plugin.yaml.tmpl, its module built by `make plugins`
// to bin/wasm/EXAMPLE-plugin.wasm next to DIR) and creates or updates its
// Plugin object through the API. Uploads are content-addressed and apply is
// create-or-update, so a restart changes nothing unless a module was
// rebuilt, which then hot-swaps. A module that was not built is logged and
// skipped.
func installExamplePlugins(ctx context.Context, log *slog.Logger, dir string, cfg *rest.Config, c *client) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	modules := filepath.Join(filepath.Dir(abs), "bin", "wasm")
	var templates []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == examplePluginTemplate {
			templates = append(templates, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("HTTP client: %w", err)
	}
	for _, tmpl := range templates {
		example := filepath.Base(filepath.Dir(tmpl))
		module := filepath.Join(modules, example+"-plugin.wasm")
		wasm, err := os.ReadFile(module)
		if err != nil {
			log.Warn("example plugin module not built; run `make plugins`", "example", example, "module", module, "err", err)
			continue
		}
		digest, err := uploadExampleModule(ctx, hc, cfg.Host, wasm)
		if err != nil {
			return fmt.Errorf("%s: upload %s: %w", example, module, err)
		}
		text, err := os.ReadFile(tmpl)
		if err != nil {
			return err
		}
		ms, err := parseManifests(tmpl, bytes.ReplaceAll(text, []byte(digestPlaceholder), []byte(digest)))
		if err != nil {
			return err
		}
		for _, mf := range ms {
			res, err := applyOne(ctx, c, mf, nil, &applyOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", mf.where(), err)
			}
			log.Info("example plugin applied", "name", mf.obj.GetName(), "digest", digest, "result", res.result, "file", tmpl)
		}
	}
	return nil
}

// uploadExampleModule stores wasm on the server and returns its digest.
func uploadExampleModule(ctx context.Context, hc *http.Client, server string, wasm []byte) (string, error) {
	digest := host.Digest(wasm)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(server, "/")+exampleModulesPath+"?digest="+digest, bytes.NewReader(wasm))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/wasm")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return digest, nil
}
