package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

var configMapKind = controller.Kind{Resource: kinds.ConfigMapResource, Kind: "ConfigMap", Namespaced: true}

// TestBuiltinPrimaryWithoutGeneration: a controller whose kind has no
// metadata.generation (ConfigMaps, as in Kubernetes) reconciles every
// change of the object's content, also of one whose creator sent a
// generation the server then never changes; a write of the same content
// does not call it again.
func TestBuiltinPrimaryWithoutGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := instrument(newEngine(t))
		var mu sync.Mutex
		seen := map[string][]string{} // the data.v each reconcile saw, by name
		r := controller.ReconcilerFunc(func(_ context.Context, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			name := req.Object.String("metadata", "name")
			seen[name] = append(seen[name], req.Object.String("data", "v"))
			return &abi.ReconcileResponse{}, nil
		})
		_, stop := runManager(t, newController(t, c, "configmaps", r, func(o *controller.Options) {
			o.For, o.Owns = configMapKind, nil
			o.ResyncPeriod = time.Hour
		}))
		defer stop()
		ctx := context.Background()
		for _, gen := range []int64{0, 5} {
			cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprint("gen-", gen), "namespace": "default"},
				"data":     map[string]any{"v": "1"}}}
			if gen != 0 {
				cm.SetGeneration(gen)
			}
			out := create(t, c, kinds.ConfigMapResource, cm)
			if out.GetGeneration() != gen {
				t.Fatalf("created with generation %d: %d", gen, out.GetGeneration())
			}
			synctest.Wait()
			for _, v := range []string{"2", "2", "3"} { // the second "2" changes nothing
				cur := get(t, c, kinds.ConfigMapResource, out.GetName())
				_ = unstructured.SetNestedField(cur.Object, v, "data", "v")
				upd, err := c.Update(ctx, kinds.ConfigMapResource, cur, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if upd.GetGeneration() != gen {
					t.Errorf("updated: generation %d, want %d as created", upd.GetGeneration(), gen)
				}
				synctest.Wait()
			}
			time.Sleep(5 * time.Minute) // no retries either
			synctest.Wait()
			mu.Lock()
			got := seen[out.GetName()]
			mu.Unlock()
			if want := []string{"1", "2", "3"}; !slices.Equal(got, want) {
				t.Errorf("%s (generation %d) reconciled at data.v %v, want %v", out.GetName(), gen, got, want)
			}
		}
	})
}
