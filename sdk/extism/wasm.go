//go:build wasip1

package extism

import (
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/internal/glue"
)

// The Extism kernel's functions, see https://extism.org (the ABI of
// extism:host/env): memory lives in the kernel and is addressed by 64-bit
// offsets.

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func inputLoadU64(offs uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(offs uint64) uint32

//go:wasmimport extism:host/env alloc
func kalloc(n uint64) uint64

//go:wasmimport extism:host/env free
func kfree(offs uint64)

//go:wasmimport extism:host/env length
func klength(offs uint64) uint64

//go:wasmimport extism:host/env load_u64
func loadU64(offs uint64) uint64

//go:wasmimport extism:host/env load_u8
func loadU8(offs uint64) uint32

//go:wasmimport extism:host/env store_u64
func storeU64(offs uint64, v uint64)

//go:wasmimport extism:host/env store_u8
func storeU8(offs uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(offs, n uint64)

//go:wasmimport extism:host/env error_set
func errorSet(offs uint64)

//go:wasmimport extism:host/user log
func hostLog(offs uint64) uint64

//go:wasmimport extism:host/user get
func hostGet(offs uint64) uint64

//go:wasmimport extism:host/user list
func hostList(offs uint64) uint64

//go:wasmimport extism:host/user emit_event
func hostEmitEvent(offs uint64) uint64

//go:wasmimport extism:host/user create
func hostCreate(offs uint64) uint64

//go:wasmimport extism:host/user update
func hostUpdate(offs uint64) uint64

//go:wasmimport extism:host/user patch
func hostPatch(offs uint64) uint64

//go:wasmimport extism:host/user delete
func hostDelete(offs uint64) uint64

//go:wasmimport extism:host/user http
func hostHTTP(offs uint64) uint64

// inBuf holds the input of the call in progress, reused across calls.
var inBuf []byte

//go:wasmexport setpoint_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport reconcile
func reconcile() int32 { return call(abi.ExportReconcile) }

//go:wasmexport admit
func admit() int32 { return call(abi.ExportAdmit) }

//go:wasmexport finalize
func finalize() int32 { return call(abi.ExportFinalize) }

func call(export string) int32 {
	n := inputLength()
	if uint64(cap(inBuf)) < n {
		inBuf = make([]byte, n)
	}
	inBuf = inBuf[:n]
	var i uint64
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Pointer(&inBuf[i])) = inputLoadU64(i)
	}
	for ; i < n; i++ {
		inBuf[i] = byte(inputLoadU8(i))
	}
	out, failed := module.Call(export, inBuf)
	offs := store(out)
	if failed {
		errorSet(offs)
		return 1
	}
	outputSet(offs, uint64(len(out)))
	return 0
}

// store copies b into a new kernel block and returns its offset.
func store(b []byte) uint64 {
	n := uint64(len(b))
	offs := kalloc(n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		storeU64(offs+i, *(*uint64)(unsafe.Pointer(&b[i])))
	}
	for ; i < n; i++ {
		storeU8(offs+i, uint32(b[i]))
	}
	return offs
}

// load copies the kernel block at offs out and frees it.
func load(offs uint64) []byte {
	if offs == 0 {
		return nil
	}
	n := klength(offs)
	b := make([]byte, n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Pointer(&b[i])) = loadU64(offs + i)
	}
	for ; i < n; i++ {
		b[i] = byte(loadU8(offs + i))
	}
	kfree(offs)
	return b
}

func hostCall(fn func(uint64) uint64, req []byte) []byte {
	in := store(req)
	out := load(fn(in))
	kfree(in)
	return out
}

// callHost makes each host call through the module's imports.
var callHost = glue.CallHost(glue.Imports[func(offs uint64) uint64]{
	Log: hostLog, Get: hostGet, List: hostList, EmitEvent: hostEmitEvent,
	Create: hostCreate, Update: hostUpdate, Patch: hostPatch, Delete: hostDelete, HTTP: hostHTTP,
}, hostCall)
