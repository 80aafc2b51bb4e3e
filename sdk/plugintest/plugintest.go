// Package plugintest is a Host for testing plugin logic natively: it serves
// objects from memory, takes writes into memory (plugin.Create, Update,
// Patch, Delete and their status forms), records logs, events and writes,
// and can deny reads and writes, so a handler's behaviour is checked with
// plain `go test` and no Wasm at all. To test the built module under the real
// host, use sdk/realhost (through the setpoint binary), or inside the
// Setpoint repository the main module's host/hosttest.
package plugintest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

var _ plugin.Host = (*Host)(nil)

// LogEntry is one recorded Log call.
type LogEntry struct {
	Level, Message string
	Attrs          []string
}

// Host implements plugin.Host in memory. The zero value serves no objects
// and permits every read.
type Host struct {
	mu      sync.Mutex
	objects []abi.RawJSON
	// Deny, when set, is consulted before each Get and List with the kind;
	// a non-nil error is returned to the plugin as a denial.
	Deny func(kind string) error
	// DenyWrite, when set, is consulted before each write with the kind;
	// a non-nil error is returned to the plugin as a Forbidden WriteError.
	DenyWrite func(kind string) error
	Logs      []LogEntry
	Events    []abi.EmitEventRequest
	// Writes records every write, in order, with its outcome.
	Writes []WriteEntry
	// HTTPHandler, when set, answers the plugin's HTTP calls (plugin.HTTP);
	// without it every call is refused as not granted. Return a
	// *plugin.HTTPError to fail a call as the server would.
	HTTPHandler func(abi.HTTPRequest) (abi.HTTPResponse, error)
	// Requests records every HTTP call, in order, with its outcome.
	Requests []HTTPEntry
	rev      int // the last resourceVersion a write assigned
}

// Add makes objects visible to Get and List, and to writes.
func (h *Host) Add(objects ...abi.RawJSON) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.objects = append(h.objects, objects...)
}

// Log implements plugin.Host.
func (h *Host) Log(level, msg string, attrs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Logs = append(h.Logs, LogEntry{Level: level, Message: msg, Attrs: attrs})
}

// Get implements plugin.Host.
func (h *Host) Get(req abi.GetRequest) (abi.RawJSON, bool, error) {
	if err := h.deny(req.Kind); err != nil {
		return nil, false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.find(abi.ObjectRef{APIVersion: req.APIVersion, Kind: req.Kind, Namespace: req.Namespace, Name: req.Name})
	if i < 0 {
		return nil, false, nil
	}
	return h.objects[i], true, nil
}

// List implements plugin.Host; LabelSelector supports k=v terms joined by
// commas.
func (h *Host) List(req abi.ListRequest) ([]abi.RawJSON, error) {
	if err := h.deny(req.Kind); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []abi.RawJSON
	for _, o := range h.objects {
		ref := abi.RefOf(o)
		if ref.Kind != req.Kind || (req.Namespace != "" && ref.Namespace != req.Namespace) || !matches(o, req.LabelSelector) {
			continue
		}
		out = append(out, o)
		if req.Limit > 0 && len(out) == req.Limit {
			break
		}
	}
	return out, nil
}

func matches(o abi.RawJSON, selector string) bool {
	for _, term := range strings.Split(selector, ",") {
		if term == "" {
			continue
		}
		k, v, _ := strings.Cut(term, "=")
		if o.String("metadata", "labels", k) != v {
			return false
		}
	}
	return true
}

// EmitEvent implements plugin.Host.
func (h *Host) EmitEvent(ev abi.EmitEventRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Events = append(h.Events, ev)
	return nil
}

func (h *Host) deny(kind string) error {
	if h.Deny == nil {
		return nil
	}
	if err := h.Deny(kind); err != nil {
		return fmt.Errorf("host: permission denied: %w", err)
	}
	return nil
}
