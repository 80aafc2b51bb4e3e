//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

var _ plugin.Host = wasmHost{}

// The glue's buffers, reused across calls. The Go heap does not move, so an
// address handed to the host stays valid while the slice is referenced here.
var (
	inBuf   []byte // input region returned by setpoint_alloc
	outBuf  []byte // output region of the last export call
	hostBuf []byte // responses of host calls
	reqBuf  []byte // requests of host calls
)

//go:wasmexport setpoint_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport setpoint_handlers
func handlerBits() int32 { return handlers.Bits() }

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
	input := unsafe.Slice((*byte)(ptr), n)
	out, failed := handlers.Dispatch(wasmHost{}, export, input, outBuf[:0])
	outBuf = out
	if len(out) > abi.MaxDocumentLen {
		out = append(out[:0], "plugin: output too large"...)
		failed = true
	}
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

// wasmHost is the Host of a plugin running under Setpoint.
type wasmHost struct{}

func (wasmHost) Log(level, msg string, attrs ...string) {
	r := abi.LogRequest{Level: level, Message: msg}
	if len(attrs) > 0 {
		r.Attrs = make(map[string]string, len(attrs)/2)
		for i := 0; i+1 < len(attrs); i += 2 {
			r.Attrs[attrs[i]] = attrs[i+1]
		}
	}
	reqBuf = r.AppendJSON(reqBuf[:0])
	hostCall(hostLog, reqBuf)
}

func (wasmHost) Get(req abi.GetRequest) (abi.RawJSON, bool, error) {
	reqBuf = req.AppendJSON(reqBuf[:0])
	var resp abi.GetResponse
	if err := resp.UnmarshalJSON(hostCall(hostGet, reqBuf)); err != nil {
		return nil, false, err
	}
	if resp.Error != "" {
		return nil, false, hostError(resp.Error)
	}
	return resp.Object, resp.Found, nil
}

func (wasmHost) List(req abi.ListRequest) ([]abi.RawJSON, error) {
	reqBuf = req.AppendJSON(reqBuf[:0])
	var resp abi.ListResponse
	if err := resp.UnmarshalJSON(hostCall(hostList, reqBuf)); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, hostError(resp.Error)
	}
	return resp.Items, nil
}

func (wasmHost) EmitEvent(ev abi.EmitEventRequest) error {
	reqBuf = ev.AppendJSON(reqBuf[:0])
	var resp abi.HostResponse
	if err := resp.UnmarshalJSON(hostCall(hostEmitEvent, reqBuf)); err != nil {
		return err
	}
	if resp.Error != "" {
		return hostError(resp.Error)
	}
	return nil
}
