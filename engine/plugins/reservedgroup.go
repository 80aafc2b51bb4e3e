package plugins

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/kinds"
)

// reservedGroup refuses a CustomResourceDefinition in Group other than the
// Plugin kind's own. The group names Setpoint's own kinds, as Kubernetes
// reserves its groups (*.k8s.io, *.kubernetes.io): a user's kind there
// could take a name the server gives one of its kinds later, and would be
// treated as privileged (privilegedGroups) without having asked to be.
func reservedGroup(req *engine.AdmissionRequest) error {
	if req.Resource.GroupResource() != kinds.CRDResource.GroupResource() || req.Subresource != "" || req.Object == nil {
		return nil
	}
	group, _, _ := unstructured.NestedString(req.Object.Object, "spec", "group")
	if group != Group || req.Name == crdName {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: kinds.CRDResource.Group, Kind: "CustomResourceDefinition"}, req.Name,
		field.ErrorList{field.Invalid(field.NewPath("spec", "group"), group,
			"the group is reserved for the server's own kinds; choose a group of your own, such as example.com")})
}
