package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// malformedObjects are bodies a client may send; each must be refused or
// stored, never panic.
var malformedObjects = []string{
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":"x"}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","labels":{"a":1}},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","labels":"x"},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","finalizers":[1,{}]},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","ownerReferences":"x"},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","ownerReferences":[{"uid":5}]},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","creationTimestamp":"yesterday"},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","deletionTimestamp":[]},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":["m"]},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m"},"spec":[]}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m"},"spec":null}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m"},"spec":{"name":null,"size":null}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m"},"spec":{"name":"a","size":"small"},"status":"x"}`,
	`{"apiVersion":7,"kind":"Widget","metadata":{"name":"m"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":{},"metadata":{"name":"m"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","generateName":5}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","annotations":{"a":null}},"spec":{"name":"a","size":"small"}}`,
	`{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"m","managedFields":"x"},"spec":{"name":"a","size":"small"}}`,
}

func TestMalformedObjectsDoNotPanic(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	mustCreate(t, s, widget("target", "small", nil))
	for _, body := range malformedObjects {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("bad test body %s: %v", body, err)
		}
		t.Run(body, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: m}
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("Create panicked: %v", v)
					}
				}()
				c := u.DeepCopy()
				c.Object["metadata"] = withNamespace(c.Object["metadata"])
				_, _ = s.Create(ctx, widgets, c, metav1.CreateOptions{})
			}()
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("Patch panicked: %v", v)
					}
				}()
				patch := map[string]any{"metadata": m["metadata"], "spec": m["spec"]}
				b, _ := utiljson.Marshal(patch)
				_, _ = s.Patch(ctx, widgets, "default", "target", types.MergePatchType, b, metav1.PatchOptions{})
			}()
		})
	}
}

func withNamespace(md any) any {
	if m, ok := md.(map[string]any); ok {
		m["namespace"] = "default"
	}
	return md
}

func TestMalformedBuiltinsDoNotPanic(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	for _, body := range malformedObjects {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		for _, target := range []struct{ apiVersion, kind string }{{"v1", "Namespace"}, {"v1", "Event"}, {"apiextensions.k8s.io/v1", "CustomResourceDefinition"}} {
			c := (&unstructured.Unstructured{Object: m}).DeepCopy()
			if _, ok := c.Object["apiVersion"].(string); ok {
				c.Object["apiVersion"] = target.apiVersion
			}
			if _, ok := c.Object["kind"].(string); ok {
				c.Object["kind"] = target.kind
			}
			gvr := map[string]schemaGVR{"Namespace": kinds.NamespaceResource, "Event": kinds.EventResource, "CustomResourceDefinition": kinds.CRDResource}[target.kind]
			if target.kind == "Event" {
				c.Object["metadata"] = withNamespace(c.Object["metadata"])
			}
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("Create of %s %s panicked: %v", target.kind, body, v)
					}
				}()
				_, _ = s.Create(ctx, gvr, c, metav1.CreateOptions{})
			}()
		}
	}
}

type schemaGVR = schema.GroupVersionResource
