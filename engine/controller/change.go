package controller

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// What an object asks for changes in two ways, depending on its kind. Custom
// resources and CustomResourceDefinitions count the changes of everything
// but metadata (and status) in metadata.generation. The other built-in kinds
// do not, as in Kubernetes: a ConfigMap, Secret, Namespace or Role has no
// generation, or keeps forever the one its creator sent. So the controller
// compares the objects' content outside metadata and status as well: for a
// kind with a generation that comparison only confirms what the generation
// says, and for one without it is the only signal.

// contentChanged reports whether old and cur differ in anything but
// metadata and status: what the object asks for, whatever its kind names
// it (spec, data, rules, subjects). A null field equals a missing one.
func contentChanged(old, cur map[string]any) bool {
	for k, v := range cur {
		if k != "metadata" && k != "status" && !objjson.ValueEqual(v, old[k]) {
			return true
		}
	}
	for k, v := range old {
		if _, ok := cur[k]; !ok && k != "metadata" && k != "status" && v != nil {
			return true
		}
	}
	return false
}

// desiredState is what a terminal failure is remembered at: the object's
// generation and its content outside metadata and status (shared with the
// object, which the caller no longer changes).
type desiredState struct {
	generation int64
	content    map[string]any
}

func desiredStateOf(obj *unstructured.Unstructured) desiredState {
	content := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if k != "metadata" && k != "status" {
			content[k] = v
		}
	}
	return desiredState{generation: obj.GetGeneration(), content: content}
}

// same reports whether obj still asks for what d recorded.
func (d desiredState) same(obj *unstructured.Unstructured) bool {
	return d.generation == obj.GetGeneration() && !contentChanged(d.content, obj.Object)
}
