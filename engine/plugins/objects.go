package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Objects serves the host functions get, list and emit_event over the
// engine's object service. The host checks a plugin's permissions before it
// calls them.
type Objects struct {
	svc *engine.Service
	log *slog.Logger
}

// NewObjects returns the host-function adapters over svc.
func NewObjects(svc *engine.Service, log *slog.Logger) *Objects {
	if log == nil {
		log = slog.Default()
	}
	return &Objects{svc: svc, log: log}
}

func (o *Objects) resource(apiVersion, kind string) (engine.Resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return engine.Resource{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	r, ok := o.svc.ResourceForKind(gv.WithKind(kind))
	if !ok {
		return engine.Resource{}, fmt.Errorf("%w: kind %s of %s", ErrNotServed, kind, apiVersion)
	}
	return r, nil
}

// GetObject returns one object; found is false when it does not exist.
func (o *Objects) GetObject(ctx context.Context, req abi.GetRequest) ([]byte, bool, error) {
	r, err := o.resource(req.APIVersion, req.Kind)
	if err != nil {
		return nil, false, err
	}
	ns := req.Namespace
	if !r.Namespaced {
		ns = ""
	}
	obj, err := o.svc.Get(ctx, r.GVR, ns, req.Name, metav1.GetOptions{})
	if err != nil {
		if isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	b, err := obj.MarshalJSON()
	return b, err == nil, err
}

// ListObjects returns the objects of a kind that match the request.
func (o *Objects) ListObjects(ctx context.Context, req abi.ListRequest) ([][]byte, error) {
	r, err := o.resource(req.APIVersion, req.Kind)
	if err != nil {
		return nil, err
	}
	ns := req.Namespace
	if !r.Namespaced {
		ns = ""
	}
	list, err := o.svc.List(ctx, r.GVR, ns, metav1.ListOptions{LabelSelector: req.LabelSelector, Limit: int64(req.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(list.Items))
	for i := range list.Items {
		b, err := list.Items[i].MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// RecordEvent records a plugin's event as a core/v1 Event about regarding.
// In a call for a dry-run request it only logs.
func (o *Objects) RecordEvent(ctx context.Context, plugin string, regarding abi.ObjectRef, ev abi.Event) error {
	if isDryRun(ctx) {
		o.log.Info("plugin event dropped (dry run)", "plugin", plugin, "reason", ev.Reason, "name", regarding.Name)
		return nil
	}
	ns := regarding.Namespace
	if ns == "" {
		ns = engine.DefaultNamespace
	}
	typ := ev.Type
	if typ != corev1.EventTypeWarning {
		typ = corev1.EventTypeNormal
	}
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      strings.ToLower(regarding.Name + "." + rand.String(10)),
			Namespace: ns,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: regarding.APIVersion, Kind: regarding.Kind,
			Namespace: regarding.Namespace, Name: regarding.Name, UID: typesUID(regarding.UID),
		},
		Type: typ, Reason: ev.Reason, Message: ev.Message,
		Source:         corev1.EventSource{Component: "plugin/" + plugin},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		return fmt.Errorf("plugins: encode event: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Event")
	if _, err := o.svc.Create(ctx, engine.EventResource, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("plugins: record event: %w", err)
	}
	return nil
}

func typesUID(s string) types.UID { return types.UID(s) }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
