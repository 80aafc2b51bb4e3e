package main

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/plugins"
)

// servedResources tells the metrics which resources the API serves: those
// the engine serves now, and module uploads. Requests for any other
// resource, authenticated or not, count under one label, so that made-up
// paths cannot use up the label's bounded values.
func servedResources(api apiHandler) func(*request.RequestInfo) bool {
	p, ok := api.(*pluginAPI)
	if !ok {
		return nil
	}
	eng := p.api.Engine()
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
