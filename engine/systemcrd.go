package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// definitionHashAnnotation records which definition of a system CRD is
// stored, so that a server only rewrites the CRD after an upgrade changed
// it.
const definitionHashAnnotation = "setpoint.dev/definition-hash"

// systemFieldManager names the server's own writes of system CRDs in their
// managedFields.
const systemFieldManager = "setpoint-server"

// systemCRDServedTimeout bounds how long EnsureCRD waits for a CRD another
// server wrote to be served.
const systemCRDServedTimeout = 30 * time.Second

// EnsureCRD makes the server's own CustomResourceDefinition definition
// (YAML) stored and served, for kinds the server itself relies on (Plugins,
// Leases): it creates the CRD, or updates a stored one that an older
// definition wrote (the definition's hash, in the annotation
// setpoint.dev/definition-hash, differs), and returns once the service
// serves resource. Servers that start together on one store race to write
// it: the losers find it written and wait for their CRD follower (Run, which
// must be running) to serve it.
func (s *Service) EnsureCRD(ctx context.Context, definition []byte, resource schema.GroupVersionResource) error {
	// The definition is decoded strictly into the CRD's Go type first, so
	// that the engine may take it as built in its stored shape and not
	// decode it again (which would parse the API's schema at every start).
	if err := yaml.UnmarshalStrict(definition, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("decode the CustomResourceDefinition: %w", err)
	}
	ctx = kinds.WithBuiltShape(WithSystemUser(ctx, APIServerUser))
	want := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(definition, &want.Object); err != nil {
		return fmt.Errorf("decode the CustomResourceDefinition: %w", err)
	}
	sum := sha256.Sum256(definition)
	ann := want.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[definitionHashAnnotation] = hex.EncodeToString(sum[:8])
	want.SetAnnotations(ann)
	for {
		err := s.writeSystemCRD(ctx, want)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Another server wrote it meanwhile: look again.
	}
	return s.awaitServed(ctx, resource)
}

// writeSystemCRD creates or updates the CRD want. It returns the
// AlreadyExists or Conflict error of a write that lost a race.
func (s *Service) writeSystemCRD(ctx context.Context, want *unstructured.Unstructured) error {
	name := want.GetName()
	cur, err := s.Get(ctx, kinds.CRDResource, "", name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := s.Create(ctx, kinds.CRDResource, want, metav1.CreateOptions{FieldManager: systemFieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the CustomResourceDefinition %s: %w", name, err)
		}
		return err
	case err != nil:
		return fmt.Errorf("read the CustomResourceDefinition %s: %w", name, err)
	}
	if cur.GetAnnotations()[definitionHashAnnotation] == want.GetAnnotations()[definitionHashAnnotation] {
		return nil
	}
	cur.Object["spec"] = want.Object["spec"]
	cur.SetAnnotations(want.GetAnnotations())
	if _, err := s.Update(ctx, kinds.CRDResource, cur, metav1.UpdateOptions{FieldManager: systemFieldManager}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("update the CustomResourceDefinition %s: %w", name, err)
	}
	return nil
}

// awaitServed returns once the service serves resource: a list finds it.
func (s *Service) awaitServed(ctx context.Context, resource schema.GroupVersionResource) error {
	ctx, cancel := context.WithTimeout(ctx, systemCRDServedTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.List(ctx, resource, "", metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("list %s: %w", resource.GroupResource(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not served: %w", resource.GroupResource(), errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}
