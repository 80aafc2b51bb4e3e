package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// offlinePluginCommands are the plugin verbs that work without a server,
// registered under `setpoint plugin`.
var offlinePluginCommands = []func() *cobra.Command{newPluginCallCommand, newPluginTestCommand, newPluginInitCommand}

// localOptions are the flags of the commands that run a module under a host
// in this process, without a server.
type localOptions struct {
	cacheDir    string
	callTimeout time.Duration
	memoryPages uint32
	logLevel    string
}

func (o *localOptions) addFlags(cmd *cobra.Command) {
	dir := ""
	if d, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(d, "setpoint", "wasm-cache")
	}
	cmd.Flags().StringVar(&o.cacheDir, "cache-dir", dir, "where compiled modules are cached between runs (empty: no cache)")
	cmd.Flags().DurationVar(&o.callTimeout, "call-timeout", time.Second, "the deadline of one call, as the Plugin's limits.callTimeout")
	cmd.Flags().Uint32Var(&o.memoryPages, "memory-pages", 0, "the memory cap of an instance in 64 KiB pages (0: the server's default)")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "the least level of the plugin's logs shown on standard error: debug, info, warn or error")
}

// localModule loads the module at path under a host of its own. Plugin
// logs go to logs; get and list are served from objects; emitted events
// are recorded.
func localModule(ctx context.Context, o *localOptions, path string, objects *memObjects, logs io.Writer) (*host.Plugin, *eventLog, func(), error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, usageError("reading the module: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, nil, nil, usageError("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	events := &eventLog{}
	h, err := host.New(host.Options{
		CacheDir: o.cacheDir,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level})),
		Objects:  objects,
		Events:   events,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	p, err := h.Load(ctx, name, wasm, host.Config{
		Permissions: host.Permissions{Read: []string{"*"}, Events: true},
		Limits:      host.Limits{CallTimeout: o.callTimeout, MemoryPages: o.memoryPages, PoolSize: 1},
	})
	if err != nil {
		h.Close()
		return nil, nil, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return p, events, func() { p.Close(); h.Close() }, nil
}

// exports lists what a loaded module exports, for messages.
func exports(p *host.Plugin) string {
	var out []string
	for _, e := range []struct {
		name string
		has  bool
	}{{abi.ExportReconcile, p.HasReconcile()}, {abi.ExportAdmit, p.HasAdmit()}, {abi.ExportFinalize, p.HasFinalize()}} {
		if e.has {
			out = append(out, e.name)
		}
	}
	return strings.Join(out, ", ")
}

func hasExport(p *host.Plugin, export string) bool {
	switch export {
	case abi.ExportReconcile:
		return p.HasReconcile()
	case abi.ExportAdmit:
		return p.HasAdmit()
	case abi.ExportFinalize:
		return p.HasFinalize()
	}
	return false
}

type callOptions struct {
	local  localOptions
	wasm   string
	export string
}

func newPluginCallCommand() *cobra.Command {
	o := &callOptions{}
	cmd := &cobra.Command{
		Use:   "call --wasm FILE --export reconcile|admit|finalize < request.json",
		Short: "Run one call of a module offline and print its response",
		Long: `Load the module in --wasm under the same host the server runs (same ABI, limits
and sandbox), call one export with the request read from standard input (a
ReconcileRequest, AdmissionRequest or FinalizeRequest as docs/ABI.md defines
it), and print the response document. No server is needed: get and list host
calls find nothing, emitted events and the plugin's logs go to standard error.

A response that reports an error is still a response: it is printed and the
command succeeds. A failure to answer (a trap, a timeout, a guest panic, a
missing export, an ABI version the host does not serve) is printed to standard
error and the command exits 1; a request that does not parse exits 6.

` + exitCodeHelp,
		Example: `  echo '{"object":{"apiVersion":"example.setpoint.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"name":"W","size":"small"}}}' | setpoint plugin call --wasm bin/wasm/widget-plugin.wasm --export reconcile`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginCall(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.local.addFlags(cmd)
	cmd.Flags().StringVar(&o.wasm, "wasm", "", "the module (required)")
	cmd.Flags().StringVar(&o.export, "export", "", "the export to call: reconcile, admit or finalize (required)")
	return cmd
}

func runPluginCall(ctx context.Context, o *callOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if o.wasm == "" || o.export == "" {
		return usageError("--wasm and --export are required")
	}
	input, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	type request interface {
		UnmarshalJSON([]byte) error
	}
	var req request
	switch o.export {
	case abi.ExportReconcile:
		req = &abi.ReconcileRequest{}
	case abi.ExportAdmit:
		req = &abi.AdmissionRequest{}
	case abi.ExportFinalize:
		req = &abi.FinalizeRequest{}
	default:
		return usageError("--export %q: want reconcile, admit or finalize", o.export)
	}
	if err := req.UnmarshalJSON(input); err != nil {
		return exitError(exitInvalid, fmt.Errorf("reading the %s request from standard input: %w", o.export, err))
	}
	p, events, closeFn, err := localModule(ctx, &o.local, o.wasm, &memObjects{}, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	if !hasExport(p, o.export) {
		return fmt.Errorf("%s has no %s export (it exports: %s)", o.wasm, o.export, exports(p))
	}
	var resp interface{ AppendJSON([]byte) []byte }
	switch r := req.(type) {
	case *abi.ReconcileRequest:
		resp, err = p.Reconcile(ctx, r)
	case *abi.AdmissionRequest:
		resp, err = p.Admit(ctx, r)
	case *abi.FinalizeRequest:
		resp, err = p.Finalize(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("%s of %s failed: %w", o.export, o.wasm, err)
	}
	for _, ev := range events.list() {
		fmt.Fprintf(stderr, "event %s %s: %s\n", ev.Type, ev.Reason, ev.Message)
	}
	out, err := indentJSON(resp.AppendJSON(nil))
	if err != nil {
		return fmt.Errorf("%s of %s: the response is not JSON: %w", o.export, o.wasm, err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

func indentJSON(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.MarshalIndent(v, "", "  ")
}

// memObjects serves the get and list host functions from objects in
// memory.
type memObjects struct {
	objects []map[string]any
}

var _ host.ObjectReader = (*memObjects)(nil)

func (m *memObjects) match(obj map[string]any, apiVersion, kind, namespace string) bool {
	md, _ := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	return obj["apiVersion"] == apiVersion && obj["kind"] == kind && (namespace == "" || ns == namespace)
}

// GetObject implements host.ObjectReader.
func (m *memObjects) GetObject(_ context.Context, _ string, req abi.GetRequest) ([]byte, bool, error) {
	for _, o := range m.objects {
		md, _ := o["metadata"].(map[string]any)
		if m.match(o, req.APIVersion, req.Kind, req.Namespace) && md["name"] == req.Name {
			b, err := json.Marshal(o)
			return b, err == nil, err
		}
	}
	return nil, false, nil
}

// ListObjects implements host.ObjectReader.
func (m *memObjects) ListObjects(_ context.Context, _ string, req abi.ListRequest) ([][]byte, error) {
	sel, err := k8slabels.Parse(req.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("label selector: %w", err)
	}
	var out [][]byte
	for _, o := range m.objects {
		if !m.match(o, req.APIVersion, req.Kind, req.Namespace) {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		ls := k8slabels.Set{}
		if l, ok := md["labels"].(map[string]any); ok {
			for k, v := range l {
				s, _ := v.(string)
				ls[k] = s
			}
		}
		if !sel.Matches(ls) {
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		if req.Limit > 0 && len(out) == req.Limit {
			break
		}
	}
	return out, nil
}

// eventLog records the events a module emits through emit_event.
type eventLog struct {
	mu     sync.Mutex
	events []abi.Event
}

// RecordEvent implements host.EventRecorder.
func (e *eventLog) RecordEvent(_ context.Context, _ string, _ abi.ObjectRef, ev abi.Event) error {
	if ev.Type != "Normal" && ev.Type != "Warning" {
		return errors.New("event type must be Normal or Warning")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
	return nil
}

func (e *eventLog) list() []abi.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]abi.Event(nil), e.events...)
}
