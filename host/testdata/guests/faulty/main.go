// Command faulty is the host tests' misbehaving guest (native ABI). Its
// reconcile handler does what the request's config "mode" says: ok, loop
// (spin forever), alloc (allocate without bound), panic, huge (a 2 MiB
// status), badjson (an invalid status document), flood (log without
// end), trap (read outside linear memory: a Wasm trap), panicptr (panic
// with a message holding a pointer that differs from call to call), or get
// (read the object named by config kind/name through the host), or grow
// (allocate and touch config "mb" MiB, keep it, then sleep config "sleep").
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/guest"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

func init() {
	guest.Register(plugin.Handlers{Reconcile: reconcile})
}

var (
	sink  [][]byte
	bytes byte
	// grow makes each panicptr call allocate at a new address.
	grow [][]byte
)

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	switch req.Config["mode"] {
	case "loop":
		n := 0
		for {
			n++
		}
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "panic":
		var m map[string]int
		m["boom"]++
	case "trap":
		// Go's nil check does not catch a load past the end of linear
		// memory; Wasm traps.
		bytes = *(*byte)(unsafe.Pointer(uintptr(0xfffffff0)))
	case "panicptr":
		grow = append(grow, make([]byte, 4096))
		panic(fmt.Sprintf("bad object at %p", &grow[len(grow)-1][0]))
	case "grow":
		mb, _ := strconv.Atoi(req.Config["mb"])
		b := make([]byte, mb<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		grow = append(grow, b)
		d, _ := time.ParseDuration(req.Config["sleep"])
		time.Sleep(d)
	case "huge":
		return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("blob", strings.Repeat("x", 2<<20)).Bytes()}, nil
	case "badjson":
		return &abi.ReconcileResponse{Status: abi.RawJSON(`{"state":`)}, nil
	case "flood":
		for i := 0; ; i++ {
			h.Log("info", "flood")
		}
	case "get":
		obj, found, err := h.Get(abi.GetRequest{APIVersion: req.Config["apiVersion"], Kind: req.Config["kind"],
			Namespace: req.Config["namespace"], Name: req.Config["name"]})
		if err != nil {
			return nil, err
		}
		st := abi.NewObject(nil).Bool("found", found).Raw("object", obj)
		items, err := h.List(abi.ListRequest{APIVersion: req.Config["apiVersion"], Kind: req.Config["kind"], Namespace: req.Config["namespace"]})
		if err != nil {
			return nil, err
		}
		st.Int("listed", int64(len(items)))
		h.Log("warn", "read objects", "kind", req.Config["kind"])
		if err := h.EmitEvent(abi.EmitEventRequest{Event: abi.Event{Type: "Normal", Reason: "Read", Message: "read " + req.Config["name"]}}); err != nil {
			return nil, err
		}
		return &abi.ReconcileResponse{Status: st.Bytes()}, nil
	}
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Str("state", "ok").Bytes()}, nil
}

func main() {}
