//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
)

// The glue's buffers, reused across calls (module keeps the output). The
// Go heap does not move, so an address handed to the host stays valid
// while the slice is referenced here.
var (
	inBuf   []byte // input region returned by setpoint_alloc
	hostBuf []byte // responses of host calls
)

//go:wasmexport setpoint_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport setpoint_handlers
func handlerBits() int32 { return module.Bits() }

//go:wasmexport setpoint_alloc
func alloc(size int32) unsafe.Pointer {
	if size <= 0 {
		size = 1
	}
	if int(size) > cap(inBuf) {
		n := 2 * cap(inBuf)
		if n < int(size) {
			n = int(size)
		}
		inBuf = make([]byte, n)
	}
	inBuf = inBuf[:cap(inBuf)]
	return unsafe.Pointer(&inBuf[0])
}

//go:wasmexport reconcile
func reconcile(ptr unsafe.Pointer, n int32) int64 { return call(abi.ExportReconcile, ptr, n) }

//go:wasmexport admit
func admit(ptr unsafe.Pointer, n int32) int64 { return call(abi.ExportAdmit, ptr, n) }

//go:wasmexport finalize
func finalize(ptr unsafe.Pointer, n int32) int64 { return call(abi.ExportFinalize, ptr, n) }

func call(export string, ptr unsafe.Pointer, n int32) int64 {
	out, failed := module.Call(export, unsafe.Slice((*byte)(ptr), n))
	packed := int64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | int64(len(out))
	if failed {
		packed |= abi.FailureFlag
	}
	return packed
}

//go:wasmimport setpoint log
func hostLog(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint get
func hostGet(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint list
func hostList(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint emit_event
func hostEmitEvent(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint create
func hostCreate(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint update
func hostUpdate(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint patch
func hostPatch(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint delete
func hostDelete(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint http
func hostHTTP(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32

//go:wasmimport setpoint result
func hostResult(out unsafe.Pointer, outCap int32) int32

// hostCall sends req through fn and returns the response document, which
// aliases hostBuf until the next host call.
func hostCall(fn func(unsafe.Pointer, int32, unsafe.Pointer, int32) int32, req []byte) []byte {
	if cap(hostBuf) < 4096 {
		hostBuf = make([]byte, 4096)
	}
	hostBuf = hostBuf[:cap(hostBuf)]
	n := fn(unsafe.Pointer(unsafe.SliceData(req)), int32(len(req)), unsafe.Pointer(&hostBuf[0]), int32(len(hostBuf)))
	if int(n) > len(hostBuf) {
		hostBuf = make([]byte, n)
		n = hostResult(unsafe.Pointer(&hostBuf[0]), n)
	}
	if n < 0 {
		n = 0
	}
	return hostBuf[:n]
}

// callHost makes each host call through the module's imports.
var callHost = glue.CallHost(glue.Imports[func(req unsafe.Pointer, reqLen int32, out unsafe.Pointer, outCap int32) int32]{
	Log: hostLog, Get: hostGet, List: hostList, EmitEvent: hostEmitEvent,
	Create: hostCreate, Update: hostUpdate, Patch: hostPatch, Delete: hostDelete, HTTP: hostHTTP,
}, hostCall)
