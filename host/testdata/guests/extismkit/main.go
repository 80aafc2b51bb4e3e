// Command extismkit is an Extism-ABI guest that uses the idioms of Extism
// plugin kits through extism:host/env directly: config_get, var_get and
// var_set, and the log functions. Its reconcile handler does what the
// request's config "mode" says:
//
//	config  status.greeting is config_get("greeting")
//	var     counts calls in the var "n" and reports it as status.n
//	log     logs one line at each level through log_trace .. log_error
//	        and reports get_log_level as status.level
//	trap    reads far outside linear memory (a Wasm trap)
//	panic   panics (recovered by the kit and reported with error_set)
//	errorzero sets an error with error_set and returns 0 all the same
//	sleep   sleeps for config "sleep" (time.Sleep: WASI poll_oneoff)
//	ok      status.state is "ok"
package main

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/extism"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

//go:wasmimport extism:host/env alloc
func kalloc(n uint64) uint64

//go:wasmimport extism:host/env length
func klength(offs uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(offs uint64, v uint32)

//go:wasmimport extism:host/env load_u8
func loadU8(offs uint64) uint32

//go:wasmimport extism:host/env config_get
func configGet(key uint64) uint64

//go:wasmimport extism:host/env var_get
func varGet(key uint64) uint64

//go:wasmimport extism:host/env var_set
func varSet(key, value uint64)

//go:wasmimport extism:host/env log_trace
func logTrace(msg uint64)

//go:wasmimport extism:host/env error_set
func errorSet(msg uint64)

//go:wasmimport extism:host/env get_log_level
func getLogLevel() int32

//go:wasmimport extism:host/env log_debug
func logDebug(msg uint64)

//go:wasmimport extism:host/env log_info
func logInfo(msg uint64)

//go:wasmimport extism:host/env log_warn
func logWarn(msg uint64)

//go:wasmimport extism:host/env log_error
func logError(msg uint64)

// put copies s into a new kernel block, byte by byte (the values are small).
func put(s string) uint64 {
	offs := kalloc(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		storeU8(offs+uint64(i), uint32(s[i]))
	}
	return offs
}

// get copies the kernel block at offs out; 0 is "absent".
func get(offs uint64) (string, bool) {
	if offs == 0 {
		return "", false
	}
	b := make([]byte, klength(offs))
	for i := range b {
		b[i] = byte(loadU8(offs + uint64(i)))
	}
	return string(b), true
}

func init() {
	extism.Register(plugin.Handlers{Reconcile: reconcile})
}

var sink byte

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	st := abi.NewObject(nil)
	switch req.Config["mode"] {
	case "config":
		v, ok := get(configGet(put("greeting")))
		st.Str("greeting", v).Bool("found", ok)
	case "var":
		v, _ := get(varGet(put("n")))
		n, _ := strconv.Atoi(v)
		n++
		varSet(put("n"), put(strconv.Itoa(n)))
		st.Int("n", int64(n))
	case "log":
		logTrace(put("kit trace"))
		logDebug(put("kit debug"))
		logInfo(put("kit info"))
		logWarn(put("kit warn"))
		logError(put("kit error"))
		st.Int("level", int64(getLogLevel()))
	case "trap":
		// A load past the end of linear memory: Go's nil check does not
		// catch it, Wasm traps.
		sink = *(*byte)(unsafe.Pointer(uintptr(0xfffffff0)))
	case "panic":
		panic("extismkit panic")
	case "errorzero":
		// An error set, and the export then returns 0 with a response.
		errorSet(put("extismkit error with 0 returned"))
	case "sleep":
		d, _ := time.ParseDuration(req.Config["sleep"])
		time.Sleep(d)
	}
	return &abi.ReconcileResponse{Status: st.Str("state", "ok").Bytes()}, nil
}

func main() {}
