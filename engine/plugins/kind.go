package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Group and Version of the Plugin kind.
const (
	Group   = "setpoint.dev"
	Version = "v1alpha1"
	Kind    = "Plugin"
)

// Resource is the Plugin kind's resource.
var Resource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "plugins"}

// crdHashAnnotation records which definition of the kind is stored, so that
// a server only rewrites the CRD after an upgrade changed it.
const crdHashAnnotation = "setpoint.dev/definition-hash"

// crdName is the name of the CustomResourceDefinition that serves Plugins.
const crdName = "plugins." + Group

// pluginCRD registers the Plugin kind. It is served like any kind, so
// validation, defaulting, `kubectl explain` and tables come from its schema.
const pluginCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: plugins.setpoint.dev
  labels:
    setpoint.dev/system: "true"
spec:
  group: setpoint.dev
  scope: Cluster
  names:
    plural: plugins
    singular: plugin
    kind: Plugin
    listKind: PluginList
    shortNames: [pl]
    categories: [setpoint]
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Digest
      type: string
      jsonPath: .spec.module.digest
      description: The module the plugin should run.
    - name: Phase
      type: string
      jsonPath: .status.phase
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Calls
      type: integer
      jsonPath: .status.calls
      priority: 1
    - name: Errors
      type: integer
      jsonPath: .status.errors
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Plugin runs an uploaded Wasm module as the reconcile and admission logic of kinds.
        required: [spec]
        properties:
          spec:
            type: object
            description: Which module to run, what it is bound to, what it may do.
            required: [module]
            properties:
              module:
                type: object
                description: The module, by the digest its upload returned.
                required: [digest]
                properties:
                  digest:
                    type: string
                    description: 'The module''s content address: "sha256:" and 64 lower-case hex digits.'
                    pattern: '^sha256:[0-9a-f]{64}$'
              reconcile:
                type: object
                description: The kind the plugin reconciles and the kinds of the children it manages.
                required: [for]
                properties:
                  for:
                    type: string
                    description: 'The reconciled resource, as "plural.group" ("plural" for the core group), e.g. widgets.example.setpoint.dev.'
                    minLength: 1
                  owns:
                    type: array
                    description: The resources of the children, as "plural.group".
                    items:
                      type: string
              admission:
                type: array
                description: Admission bindings; mutating plugins run before schema validation, validating ones after.
                items:
                  type: object
                  required: [resources, type]
                  properties:
                    resources:
                      type: array
                      description: 'The admitted resources, as "plural.group"; "*" for every resource.'
                      minItems: 1
                      items:
                        type: string
                    operations:
                      type: array
                      description: The operations admitted; all of them when empty.
                      items:
                        type: string
                        enum: [CREATE, UPDATE, DELETE]
                    type:
                      type: string
                      description: Mutating or Validating.
                      enum: [Mutating, Validating]
                    failurePolicy:
                      type: string
                      description: 'What a failed call (timeout, trap, bad output) does: Fail denies the write, Ignore lets it through.'
                      enum: [Fail, Ignore]
                      default: Fail
              permissions:
                type: object
                description: The resources the plugin may reach through host functions.
                properties:
                  read:
                    type: array
                    description: 'Resources it may get and list, as "plural.group"; "*" for all.'
                    items:
                      type: string
                  write:
                    type: array
                    description: 'Resources it may write. "events" allows emitting events.'
                    items:
                      type: string
              limits:
                type: object
                description: Bounds of each call and instance; zero values get the host's defaults.
                properties:
                  callTimeout:
                    type: string
                    description: The deadline of one call, as a Go duration (e.g. 500ms).
                    pattern: '^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$'
                  memoryPages:
                    type: integer
                    description: The memory cap of an instance, in 64 KiB pages.
                    minimum: 1
                    maximum: 65536
                  poolSize:
                    type: integer
                    description: The most instances that run at once.
                    minimum: 1
                    maximum: 256
              config:
                type: object
                description: Handed to the plugin in every call.
                additionalProperties:
                  type: string
              privileged:
                type: boolean
                description: 'Lets the plugin write resources that can grant privileges (Plugins and the rest of setpoint.dev, CustomResourceDefinitions, RBAC, ServiceAccounts, Secrets) through reconcile.owns, permissions.write and mutating admission; without it those are refused, "*" included. Only an administrator should set it.'
          status:
            type: object
            description: What the server made of the spec.
            properties:
              phase:
                type: string
                description: Pending, Loaded or Failed.
              loadedDigest:
                type: string
                description: The digest of the module serving calls.
              preemption:
                type: string
                description: How calls of the loaded module are stopped at their deadline (loop-checks, or wazero and why), see docs/ABI.md.
              calls:
                type: integer
                format: int64
                description: Calls into the plugin since this server started.
              errors:
                type: integer
                format: int64
                description: Failed calls (traps, timeouts, bad output) since this server started.
              lastError:
                type: string
                description: The last failed call's error.
              observedGeneration:
                type: integer
                format: int64
              conditions:
                type: array
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type:
                      type: string
                    status:
                      type: string
                    reason:
                      type: string
                    message:
                      type: string
                    observedGeneration:
                      type: integer
                      format: int64
                    lastTransitionTime:
                      type: string
                      format: date-time
`

// serverFieldManager names the server's own writes of the Plugin CRD in its
// managedFields.
const serverFieldManager = "setpoint-server"

// EnsureKind registers the Plugin kind through svc: it creates its
// CustomResourceDefinition, or updates one whose spec differs, and returns
// once svc serves Plugins. Servers that start together on one store race to
// create it: the losers find it created and wait for their engine's CRD
// follower (Service.Run, which must be running) to serve it.
func EnsureKind(ctx context.Context, svc *engine.Service) error {
	want := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(pluginCRD), &want.Object); err != nil {
		return fmt.Errorf("plugins: decode the Plugin CRD: %w", err)
	}
	sum := sha256.Sum256([]byte(pluginCRD))
	want.SetAnnotations(map[string]string{crdHashAnnotation: hex.EncodeToString(sum[:8])})
	for {
		err := ensureCRD(ctx, svc, want)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Another server wrote it meanwhile: look again.
	}
	return awaitServed(ctx, svc)
}

// ensureCRD creates or updates the Plugin CRD. It returns the
// AlreadyExists or Conflict error of a write that lost a race.
func ensureCRD(ctx context.Context, svc *engine.Service, want *unstructured.Unstructured) error {
	cur, err := svc.Get(ctx, kinds.CRDResource, "", crdName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := svc.Create(ctx, kinds.CRDResource, want.DeepCopy(), metav1.CreateOptions{FieldManager: serverFieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("plugins: register the Plugin kind: %w", err)
		}
		return err
	case err != nil:
		return fmt.Errorf("plugins: read the Plugin CRD: %w", err)
	}
	if cur.GetAnnotations()[crdHashAnnotation] == want.GetAnnotations()[crdHashAnnotation] {
		return nil
	}
	cur.Object["spec"] = want.Object["spec"]
	cur.SetAnnotations(want.GetAnnotations())
	if _, err := svc.Update(ctx, kinds.CRDResource, cur, metav1.UpdateOptions{FieldManager: serverFieldManager}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("plugins: update the Plugin CRD: %w", err)
	}
	return nil
}

// servedTimeout bounds how long EnsureKind waits for a CRD another server
// wrote to be served.
const servedTimeout = 30 * time.Second

// awaitServed returns once svc serves Plugins: a list finds the resource.
func awaitServed(ctx context.Context, svc *engine.Service) error {
	ctx, cancel := context.WithTimeout(ctx, servedTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := svc.List(ctx, Resource, "", metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("plugins: list Plugins: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("plugins: the Plugin kind is not served: %w", errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}
