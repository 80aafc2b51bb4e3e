package plugins

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
)

// Group and Version of the Plugin kind.
const (
	Group   = "setpoint.dev"
	Version = "v1alpha1"
	Kind    = "Plugin"
)

// Resource is the Plugin kind's resource.
var Resource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "plugins"}

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
                  workers:
                    type: integer
                    description: How many objects are reconciled at once. Default four times the server's cores, at least 16; each call also needs one of the plugin's instances (limits.poolSize).
                    minimum: 1
                    maximum: 256
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
              egress:
                type: object
                description: 'HTTP calls to the outside world the plugin may make (the http host function, Extism''s http_request). Without it the plugin may call nothing; see docs/ABI.md.'
                properties:
                  allow:
                    type: array
                    description: The grants; a call needs one whose URL and methods match.
                    maxItems: 64
                    items:
                      type: object
                      required: [url, methods]
                      properties:
                        url:
                          type: string
                          description: 'Scheme, host and optional port: https://api.example.com, https://*.example.com:8443, http://127.0.0.1:9000. Loopback and link-local addresses are reachable only when named literally.'
                        methods:
                          type: array
                          description: The methods allowed (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS); none is implied.
                          minItems: 1
                          items:
                            type: string
                  timeout:
                    type: string
                    description: The deadline of one HTTP call, as a Go duration; the plugin's call deadline bounds it too.
                  maxResponseBytes:
                    type: integer
                    format: int64
                    description: The largest response body; default 1 MiB.
                  concurrency:
                    type: integer
                    description: The most calls in flight; default 4.
                  ratePerSecond:
                    type: number
                    description: Calls per second (a token bucket of burst); 0 for no limit.
                  burst:
                    type: integer
                    description: The token bucket's size; default ratePerSecond rounded up.
                  caBundle:
                    type: string
                    description: PEM certificates that replace the system roots for https calls. Certificates are always verified.
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
              tier:
                type: string
                description: 'Set while a new module runs on the interpreter as it compiles in the background (--plugin-interpreter-first): interpreter, then compiled.'
              tierError:
                type: string
                description: Why the module stays on the interpreter (slower) when its background compile failed; it compiles again at the next load.
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

// EnsureKind registers the Plugin kind through svc (Service.EnsureCRD): it
// creates its CustomResourceDefinition, or updates one an older definition
// wrote, and returns once svc serves Plugins, also when another server wrote
// the CRD first.
func EnsureKind(ctx context.Context, svc *engine.Service) error {
	if err := svc.EnsureCRD(ctx, []byte(pluginCRD), Resource); err != nil {
		return fmt.Errorf("plugins: register the Plugin kind: %w", err)
	}
	return nil
}
