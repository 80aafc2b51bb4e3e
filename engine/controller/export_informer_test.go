package controller

import (
	"context"
	"log/slog"
)

// RunInformer runs an informer of kind over client, in namespace ("" for
// every namespace), until ctx is done. cached returns the resourceVersion of
// each cached object by "namespace/name"; synced is closed after the first
// list.
func RunInformer(ctx context.Context, kind Kind, client Reader, namespace string, log *slog.Logger) (cached func() map[string]string, synced <-chan struct{}) {
	i := newInformer(kind, client, namespace, log)
	go i.run(ctx)
	return func() map[string]string {
		i.mu.RLock()
		defer i.mu.RUnlock()
		out := make(map[string]string, len(i.objects))
		for k, o := range i.objects {
			out[k.Namespace+"/"+k.Name] = o.GetResourceVersion()
		}
		return out
	}, i.synced
}
