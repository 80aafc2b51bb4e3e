package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

const sprocketCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.example.setpoint.dev
  annotations:
    note: kept
spec:
  group: example.setpoint.dev
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket, listKind: SprocketList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
`

var sprockets = schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "sprockets"}

func TestEnsureCRD(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newService(t)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Several at once: one creates, the others find it and wait.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = s.EnsureCRD(ctx, []byte(sprocketCRD), sprockets) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EnsureCRD %d: %v", i, err)
		}
	}
	first, err := s.Get(ctx, kinds.CRDResource, "", "sprockets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := first.GetAnnotations()
	if ann["note"] != "kept" || len(ann[definitionHashAnnotation]) != 16 {
		t.Fatalf("annotations %v: want the definition's and its hash", ann)
	}

	// The same definition again: nothing written.
	if err := s.EnsureCRD(ctx, []byte(sprocketCRD), sprockets); err != nil {
		t.Fatal(err)
	}
	again, err := s.Get(ctx, kinds.CRDResource, "", "sprockets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != first.GetResourceVersion() {
		t.Fatalf("resourceVersion %s after ensuring the same definition, want %s", again.GetResourceVersion(), first.GetResourceVersion())
	}

	// A changed definition rewrites the spec and the hash.
	changed := strings.Replace(sprocketCRD, "size: {type: string}", "size: {type: string}\n              color: {type: string}", 1)
	if err := s.EnsureCRD(ctx, []byte(changed), sprockets); err != nil {
		t.Fatal(err)
	}
	updated, err := s.Get(ctx, kinds.CRDResource, "", "sprockets.example.setpoint.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetAnnotations()[definitionHashAnnotation] == ann[definitionHashAnnotation] {
		t.Fatal("hash unchanged after a changed definition")
	}
	if !strings.Contains(mustJSON(t, updated), `"color"`) {
		t.Fatal("the changed definition was not stored")
	}

	// A definition the service will not serve in time fails.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := s.EnsureCRD(short, []byte(sprocketCRD), schema.GroupVersionResource{Group: "example.setpoint.dev", Version: "v1", Resource: "nothings"}); err == nil || !strings.Contains(err.Error(), "is not served") {
		t.Fatalf("EnsureCRD of a resource never served: %v, want it not served", err)
	}
}

func mustJSON(t *testing.T, v interface{ MarshalJSON() ([]byte, error) }) string {
	t.Helper()
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
