package main

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/plugins"
)

// servedResources tells the metrics which resources the API serves: those
// the engine serves now, and module uploads. Requests for any other
// resource, authenticated or not, count under one label, so that made-up
// paths cannot use up the label's bounded values.
func servedResources(eng *engine.Service) func(*request.RequestInfo) bool {
	return func(info *request.RequestInfo) bool {
		if !info.IsResourceRequest {
			return false
		}
		if info.APIGroup == plugins.Group && info.APIVersion == plugins.Version && info.Resource == "modules" {
			return true
		}
		_, ok := eng.Resource(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
		return ok
	}
}
