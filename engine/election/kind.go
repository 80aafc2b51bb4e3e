package election

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// Resource is the resource of Leases, coordination.k8s.io/v1.
var Resource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// crdName is the name of the CustomResourceDefinition that serves Leases.
const crdName = "leases.coordination.k8s.io"

// crdHashAnnotation records which definition of the kind is stored, so that
// a server only rewrites the CRD after an upgrade changed it.
const crdHashAnnotation = "setpoint.dev/definition-hash"

// serverFieldManager names the server's own writes of the Lease CRD.
const serverFieldManager = "setpoint-server"

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

// EnsureKind serves the Lease kind through svc: it creates its
// CustomResourceDefinition, or updates one that differs, and returns once
// svc serves Leases. Servers that start together on one store may race to
// create it: the losers find it created and wait for their engine's CRD
// follower (Service.Run, which must be running) to serve it.
func EnsureKind(ctx context.Context, svc *engine.Service) error {
	want := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(leaseCRD), &want.Object); err != nil {
		return fmt.Errorf("election: decode the Lease CRD: %w", err)
	}
	sum := sha256.Sum256([]byte(leaseCRD))
	ann := want.GetAnnotations()
	ann[crdHashAnnotation] = hex.EncodeToString(sum[:8])
	want.SetAnnotations(ann)
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

func ensureCRD(ctx context.Context, svc *engine.Service, want *unstructured.Unstructured) error {
	cur, err := svc.Get(ctx, kinds.CRDResource, "", crdName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := svc.Create(ctx, kinds.CRDResource, want.DeepCopy(), metav1.CreateOptions{FieldManager: serverFieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("election: register the Lease kind: %w", err)
		}
		return err
	case err != nil:
		return fmt.Errorf("election: read the Lease CRD: %w", err)
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
		return fmt.Errorf("election: update the Lease CRD: %w", err)
	}
	return nil
}

// servedTimeout bounds how long EnsureKind waits for a CRD another server
// created to be served.
const servedTimeout = 30 * time.Second

// awaitServed returns once svc serves Leases: a list finds the resource.
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
			return fmt.Errorf("election: list Leases: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("election: the Lease kind is not served: %w", errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}
