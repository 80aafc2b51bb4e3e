package apiserver

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// protobufType is the media type typed Kubernetes clients (kubectl create
// namespace, client-go clientsets) send built-in objects in.
const protobufType = "application/vnd.kubernetes.protobuf"

var protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// decodeProtobuf decodes a protobuf body of a built-in type (a Namespace, an
// Event, DeleteOptions) into its unstructured form. Custom resources have no
// protobuf encoding.
func decodeProtobuf(body []byte) (map[string]any, error) {
	obj, gvk, err := protobufSerializer.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid protobuf body: %v", err))
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid protobuf body: %v", err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvk.GroupVersion().String())
	u.SetKind(gvk.Kind)
	return u.Object, nil
}
