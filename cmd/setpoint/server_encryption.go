package main

import (
	"context"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/setpoint-dev/setpoint/store/encrypt"
)

// encryptionFlags are `setpoint server`'s flags for encryption at rest.
type encryptionFlags struct {
	configFile string
}

func (e *encryptionFlags) register(f *pflag.FlagSet) {
	f.StringVar(&e.configFile, "encryption-provider-config", "",
		"a Kubernetes EncryptionConfiguration (apiserver.config.k8s.io/v1) file: the resources it lists (secrets, configmaps, ...) are stored "+
			"encrypted by its providers (aescbc, aesgcm, secretbox; identity writes plaintext), the first provider's first key writing and every key reading, "+
			"as kube-apiserver does; KMS providers are refused. Without it everything is stored as plaintext")
}

// load loads the configuration, nil when there is none. It logs which
// resources are encrypted, never a key.
func (e *encryptionFlags) load(ctx context.Context, log *slog.Logger) (*encrypt.Config, error) {
	if e.configFile == "" {
		return nil, nil
	}
	cfg, err := encrypt.Load(ctx, e.configFile)
	if err != nil {
		return nil, err
	}
	log.Info("encryption at rest", "config", e.configFile, "resources", cfg.Resources())
	return cfg, nil
}
