// Package abi is the versioned wire contract between the Setpoint plugin host
// and its Wasm guests: the export and host-function names, the handler bits
// of setpoint_handlers, the memory protocol constants of the native ABI, and
// the JSON documents that cross the boundary (ReconcileRequest,
// AdmissionRequest, FinalizeRequest, their responses, and the host-call
// requests). docs/ABI.md describes the same contract in prose.
//
// Every document has a lean, reflection-free codec (AppendJSON and
// UnmarshalJSON methods, also used by encoding/json through the Marshaler
// interfaces) because the codec runs inside the guest on the engine's hottest
// path. The codec is generated (codec_gen.go, by `go generate`) from the abi
// tags of the type definitions in abi.go, over hand-written encoder and
// decoder primitives (encode.go, decode.go). The package imports the
// standard library only and never encoding/json, so that a guest built with
// it stays small.
package abi
