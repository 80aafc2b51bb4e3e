// Package typed is the Go-struct layer of the SDK: a plugin declares its
// kind's spec and status as Go structs and writes handlers over them, and
// this package decodes the object with encoding/json before the call and
// encodes the status and children after it:
//
//	type Spec struct {
//		Size string `json:"size" enum:"small,medium,large"`
//	}
//	type Status struct {
//		State string `json:"state,omitempty"`
//	}
//
//	func reconcile(h plugin.Host, req *typed.Request[Spec, Status]) (*typed.Result[Status], error) {
//		return &typed.Result[Status]{Status: &Status{State: "Ready"}}, nil
//	}
//
//	func init() {
//		guest.Register(plugin.Handlers{Reconcile: typed.Reconcile(reconcile)})
//	}
//
// It sits beside the raw API (sdk/abi's RawJSON lookups and the Object
// encoder), which reads only the members it needs and allocates almost
// nothing; encoding/json inside a Wasm guest costs more per call (how much
// is measured by `make bench-plugin`, see docs/BENCHMARKS.md). A handler
// may mix both: Request.Raw is the raw request.
//
// The same structs give the kind's CRD schema through sdk/schema, so the
// CustomResourceDefinition is generated rather than written by hand.
package typed
