package election

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/setpoint-dev/setpoint/engine"
)

// Resource is the resource of Leases, coordination.k8s.io/v1.
var Resource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// leaseCRD serves Kubernetes' Lease (k8s.io/api/coordination/v1) as a CRD:
// the schema is LeaseSpec's, field for field. A CRD in a *.k8s.io group
// needs the api-approved.kubernetes.io annotation; it points at the API's
// reference.
const leaseCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: leases.coordination.k8s.io
  labels:
    setpoint.dev/system: "true"
  annotations:
    api-approved.kubernetes.io: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/lease-v1/
spec:
  group: coordination.k8s.io
  scope: Namespaced
  names:
    plural: leases
    singular: lease
    kind: Lease
    listKind: LeaseList
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - name: Holder
      type: string
      jsonPath: .spec.holderIdentity
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: Lease defines a lease concept.
        properties:
          spec:
            type: object
            description: The lease's holder and its times.
            properties:
              holderIdentity:
                type: string
                description: The identity of the holder of a current lease.
              leaseDurationSeconds:
                type: integer
                format: int32
                description: How long candidates wait to force-acquire the lease, measured against the last observed renewTime.
              acquireTime:
                type: string
                format: date-time
                description: When the current lease was acquired.
              renewTime:
                type: string
                format: date-time
                description: When the current holder last updated the lease.
              leaseTransitions:
                type: integer
                format: int32
                description: The number of transitions of the lease between holders.
              strategy:
                type: string
                description: The strategy for picking the leader for coordinated leader election.
              preferredHolder:
                type: string
                description: The holder the coordinated leader election signals should take over.
`

// EnsureKind serves the Lease kind through svc (Service.EnsureCRD): it
// creates its CustomResourceDefinition, or updates one an older definition
// wrote, and returns once svc serves Leases, also when another server wrote
// the CRD first.
func EnsureKind(ctx context.Context, svc *engine.Service) error {
	if err := svc.EnsureCRD(ctx, []byte(leaseCRD), Resource); err != nil {
		return fmt.Errorf("election: register the Lease kind: %w", err)
	}
	return nil
}
