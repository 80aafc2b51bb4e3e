package encrypt

import (
	"context"
	"fmt"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
	"sigs.k8s.io/yaml"
)

// Config is a loaded EncryptionConfiguration: the transformer of each
// resource it lists.
type Config struct {
	transformers map[schema.GroupResource]value.Transformer
}

// Load reads the EncryptionConfiguration at path with k8s.io/apiserver's own
// loader, which validates it as kube-apiserver does. A configuration that
// names a KMS provider is refused (ErrKMS). The errors name fields and key
// names, never a key's secret.
func Load(ctx context.Context, path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption provider configuration: %w", err)
	}
	// Refused before the loader runs: it would dial the KMS plugin.
	var raw apiserverv1.EncryptionConfiguration
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("encryption provider configuration %s: not an EncryptionConfiguration", path)
	}
	for i, r := range raw.Resources {
		for j, p := range r.Providers {
			if p.KMS != nil {
				return nil, fmt.Errorf("encryption provider configuration %s: resources[%d].providers[%d]: %w", path, i, j, ErrKMS)
			}
		}
	}
	c, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, "setpoint")
	if err != nil {
		return nil, fmt.Errorf("encryption provider configuration %s: %w", path, err)
	}
	return &Config{transformers: c.Transformers}, nil
}

// NewConfig is a Config with the given transformers, by resource ("*" as
// the resource or the group stands for any, as in an
// EncryptionConfiguration); for tests and embedders.
func NewConfig(transformers map[schema.GroupResource]value.Transformer) *Config {
	return &Config{transformers: transformers}
}

// Resources lists the resources the configuration names, sorted, as
// group-qualified names ("secrets", "*.apps").
func (c *Config) Resources() []string {
	var out []string
	for gr := range c.transformers {
		out = append(out, gr.String())
	}
	slices.Sort(out)
	return out
}

// transformer returns the transformer of gr, nil when the configuration
// does not name it. The order is Kubernetes': the resource itself, its
// group's wildcard, then any resource of any group.
func (c *Config) transformer(gr schema.GroupResource) value.Transformer {
	if t := c.transformers[gr]; t != nil {
		return t
	}
	if t := c.transformers[schema.GroupResource{Group: gr.Group, Resource: "*"}]; t != nil {
		return t
	}
	return c.transformers[schema.GroupResource{Group: "*", Resource: "*"}]
}
