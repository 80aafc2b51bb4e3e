package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
)

func init() { subcommands = append(subcommands, newPluginCommand) }

// The Plugin kind and the module upload endpoint the server serves.
var pluginGVR = schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "plugins"}

const modulesPath = "/apis/setpoint.dev/v1alpha1/modules"

func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Install, upgrade and inspect Wasm plugins",
		Long: `Manage plugins: WebAssembly modules that reconcile a kind or admit writes to
kinds. install and upgrade upload the module (content-addressed by its sha256
digest) and point a cluster-scoped Plugin object at it; the server loads it
without a restart and reports in the Plugin's status.

` + exitCodeHelp,
		Args: noArgs,
	}
	cmd.AddCommand(newPluginInstallCommand(), newPluginApplyCommand(), newPluginUpgradeCommand(), newPluginUninstallCommand(),
		newPluginListCommand(), newPluginDescribeCommand(), newPluginLogsCommand())
	for _, sub := range offlinePluginCommands {
		cmd.AddCommand(sub())
	}
	return cmd
}

type pluginOptions struct {
	client        clientOptions
	wasm          string
	reconcile     string
	owns          []string
	admit         []string
	mutating      bool
	operations    []string
	failurePolicy string
	read          []string
	permissions   []string
	write         []string
	callTimeout   time.Duration
	memoryPages   uint32
	poolSize      int
	workers       int
	config        map[string]string
	privileged    bool
	// privilegedSet: --privileged was given (upgrade changes spec.privileged
	// only then).
	privilegedSet bool
	wait          bool
	timeout       time.Duration
}

func (o *pluginOptions) addWaitFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait until the server has loaded the module (or says why it cannot)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
}

func newPluginInstallCommand() *cobra.Command {
	o := &pluginOptions{}
	cmd := &cobra.Command{
		Use:   "install NAME --wasm FILE [--reconcile RESOURCE] [--owns RESOURCE...] [--admit RESOURCE...] [--mutating] [--permissions read=RESOURCE,write=RESOURCE...]",
		Short: "Upload a module and create a Plugin that runs it",
		Long: `Upload the module in --wasm and create the Plugin NAME that runs it: it
reconciles the kind named by --reconcile (with children of the kinds in
--owns), and/or admits writes to the kinds in --admit (validating, or mutating
with --mutating). RESOURCE is what get accepts: plural, singular, kind or short
name. --permissions (or --read and --write) are what the plugin's host calls
may touch: --permissions read=widgets,read=gadgets,write=notes,write=events is
the same as --read widgets --read gadgets --write notes --write events. read
lets it get and list a kind; write lets it create, update, patch and delete
objects of a kind (outside admission calls, as user plugin:NAME, through the
server's validation and admission); write=events lets it emit events; "*" is
every kind (and, for write, events).

Installing a plugin that exists with the same spec and module changes nothing
and succeeds ("unchanged"); one that exists with another spec or module is
refused: upgrade switches its module, apply sets its whole spec.

--privileged (spec.privileged) lets the plugin write the resources that can
grant privileges: Plugins, CustomResourceDefinitions, the RBAC,
authentication, admission-configuration and certificate groups,
ServiceAccounts and Secrets. Only an administrator should set it.

` + pluginWaitHelp + `

` + exitCodeHelp,
		Example: `  setpoint plugin install widget --wasm bin/wasm/widget-plugin.wasm --reconcile widgets --owns widgetprovisions --permissions write=events
  setpoint plugin install required-labels --wasm bin/wasm/requiredlabels.wasm --admit widgets --config labels=team,env`,
		Args: rangeArgs(1, 1, "NAME --wasm FILE [flags]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginPut(cmd.Context(), o, args[0], false, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSpecFlags(cmd)
	return cmd
}

// pluginWaitHelp says what --wait does for install, apply and upgrade.
const pluginWaitHelp = `On a terminal the upload shows a progress bar, then how long the server has
been checking and compiling the module, then loading the Plugin. With --wait
(the default) the command returns once the server has loaded the module. A
failure that waiting will not mend (an invalid module or spec, a module
without an export the spec binds, a kind another Plugin reconciles, a refused
upgrade) fails the command at once with the server's reason, and says
whether the Plugin object stays.`

// addSpecFlags adds the flags that describe a Plugin's whole spec (install
// and apply).
func (o *pluginOptions) addSpecFlags(cmd *cobra.Command) {
	addClientFlags(cmd, &o.client)
	f := cmd.Flags()
	f.StringVar(&o.wasm, "wasm", "", "the module: a .wasm file built for wasip1 (required)")
	f.StringVar(&o.reconcile, "reconcile", "", "the resource whose objects the plugin reconciles")
	f.StringArrayVar(&o.owns, "owns", nil, "a resource of the children the plugin creates (repeatable)")
	f.IntVar(&o.workers, "workers", 0, "objects reconciled at once (default: the server's, four times its cores and at least 16)")
	f.StringArrayVar(&o.admit, "admit", nil, "a resource whose writes the plugin admits (repeatable)")
	f.BoolVar(&o.mutating, "mutating", false, "the admission is mutating (it may patch objects) rather than validating")
	f.StringSliceVar(&o.operations, "operations", nil, "admitted operations: CREATE, UPDATE, DELETE (default: all)")
	f.StringVar(&o.failurePolicy, "failure-policy", "Fail", "when the plugin fails to answer, Fail rejects the write and Ignore lets it through")
	f.StringArrayVar(&o.read, "read", nil, "a resource the plugin may read through host calls, or * (repeatable)")
	f.StringArrayVar(&o.write, "write", nil, "a resource the plugin may create, update, patch and delete through host calls, events to emit events, or * (repeatable)")
	f.StringSliceVar(&o.permissions, "permissions", nil, "host-call permissions as read=RESOURCE or write=RESOURCE, comma-separated or repeated")
	f.DurationVar(&o.callTimeout, "call-timeout", 0, "deadline of one call into the plugin (default: the server's)")
	f.Uint32Var(&o.memoryPages, "memory-pages", 0, "memory cap of an instance in 64 KiB pages (default: the server's)")
	f.IntVar(&o.poolSize, "pool-size", 0, "instances kept warm (default: the server's)")
	f.StringToStringVar(&o.config, "config", nil, "configuration handed to the plugin, key=value (repeatable)")
	o.addPrivilegedFlag(cmd)
	o.addWaitFlags(cmd)
	_ = cmd.MarkFlagRequired("wasm")
}

func (o *pluginOptions) addPrivilegedFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.privileged, "privileged", false, "let the plugin write Plugins, CRDs, RBAC and credential objects (spec.privileged; administrators only)")
}

func newPluginUpgradeCommand() *cobra.Command {
	o := &pluginOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade NAME --wasm FILE",
		Short: "Upload a new module and switch a Plugin to it",
		Long: `Upload the module in --wasm and point the Plugin NAME at it. The server swaps
modules without a restart; the old one keeps serving until the new one is
loaded and verified. Bindings, permissions and limits stay as they are. A
module that lacks an export the Plugin binds (admit, reconcile, or finalize
while objects carry its finalizer), traps in its init, speaks another ABI
version or needs more memory than the Plugin's cap is refused: the command
fails with the server's reason, and the old module keeps serving.
--privileged or --privileged=false also sets or clears spec.privileged.

` + pluginWaitHelp + `

` + exitCodeHelp,
		Example: `  setpoint plugin upgrade widget --wasm bin/wasm/widget-plugin.wasm`,
		Args:    rangeArgs(1, 1, "NAME --wasm FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.privilegedSet = cmd.Flags().Changed("privileged")
			return runPluginUpgrade(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().StringVar(&o.wasm, "wasm", "", "the new module (required)")
	o.addPrivilegedFlag(cmd)
	o.addWaitFlags(cmd)
	_ = cmd.MarkFlagRequired("wasm")
	return cmd
}

func newPluginListCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the plugins with their module, phase and readiness",
		Example: `  setpoint plugin list
  setpoint plugin list -o wide   # with call and error counts`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGet(cmd.Context(), o, []string{pluginGVR.Resource + "." + pluginGVR.Group}, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputHelp)
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "label selector")
	return cmd
}

func newPluginDescribeCommand() *cobra.Command {
	o := &clientOptions{}
	cmd := &cobra.Command{
		Use:     "describe NAME",
		Short:   "Show a plugin: bindings, module digest, limits, call and error counts, recent errors",
		Example: `  setpoint plugin describe widget`,
		Args:    rangeArgs(1, 1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginDescribe(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, o)
	return cmd
}

// resourceName is how a Plugin names a resource: plural.group, or the plural
// alone for the core group.
func (c *client) resourceName(arg string) (string, error) {
	if arg == "*" {
		return arg, nil
	}
	r, err := c.resolve(arg)
	if err != nil {
		return "", err
	}
	return r.qualified(), nil
}

func (c *client) resourceNames(args []string) ([]any, error) {
	var out []any
	for _, a := range args {
		for _, part := range strings.Split(a, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			n, err := c.resourceName(part)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
	}
	return out, nil
}

func runPluginUpgrade(ctx context.Context, o *pluginOptions, name string, stdout, stderr io.Writer) error {
	wasm, err := readModule(o.wasm)
	if err != nil {
		return err
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	ri := c.dynamic.Resource(pluginGVR)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return exitError(exitNotFound, fmt.Errorf("no plugin %q; `setpoint plugin install %s --wasm FILE ...` creates it", name, name))
		}
		return c.explain(err)
	}
	// The server checks the module with the limits the Plugin runs it with.
	digest, err := uploadModule(ctx, c, o.wasm, wasm, limitsQuery(cur.Object), stderr)
	if err != nil {
		return fmt.Errorf("%w; plugin %s is unchanged", err, name)
	}
	old, _, _ := unstructured.NestedString(cur.Object, "spec", "module", "digest")
	// The module serving is the status's: the spec's may have been refused.
	serving, _, _ := unstructured.NestedString(cur.Object, "status", "loadedDigest")
	if serving == "" {
		serving = old
	}
	wasPriv, _, _ := unstructured.NestedBool(cur.Object, "spec", "privileged")
	var priv *bool
	if o.privilegedSet && o.privileged != wasPriv {
		priv = &o.privileged
	}
	switch {
	case old == digest && priv == nil:
		fmt.Fprintf(stdout, "plugin.setpoint.dev/%s unchanged (module %s)\n", name, digest)
	default:
		if err := pointPluginAt(ctx, c, ri, cur, digest, priv); err != nil {
			return err
		}
		if old == digest {
			fmt.Fprintf(stdout, "plugin.setpoint.dev/%s configured (privileged: %t)\n", name, *priv)
		} else {
			fmt.Fprintf(stdout, "plugin.setpoint.dev/%s upgraded: module %s -> %s\n", name, serving, digest)
		}
	}
	if o.wait {
		return waitLoaded(ctx, c, name, digest, o.timeout, stdout, stderr,
			fmt.Sprintf("the Plugin %s stays, its spec naming module %s; upgrade it to another module, or `setpoint plugin uninstall %s`", name, digest, name))
	}
	return nil
}

// pointPluginAt sets the module digest of the Plugin cur, pinned to cur's
// resourceVersion so that a change to its spec made meanwhile (another
// upgrade) is not overwritten. The server writes the Plugin's status as it
// loads and runs modules, which moves the resourceVersion too: on a conflict
// the Plugin is read again and, if its spec is still the one read, the patch
// is retried.
//
// A non-nil privileged sets spec.privileged too.
func pointPluginAt(ctx context.Context, c *client, ri dynamic.ResourceInterface, cur *unstructured.Unstructured, digest string, privileged *bool) error {
	for attempt := 0; ; attempt++ {
		spec := map[string]any{"module": map[string]any{"digest": digest}}
		if privileged != nil {
			spec["privileged"] = *privileged
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.GetResourceVersion()},
			"spec":     spec,
		})
		_, err := ri.Patch(ctx, cur.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "setpoint"})
		if err == nil || !apierrors.IsConflict(err) || attempt == 10 {
			return c.explain(err)
		}
		fresh, gerr := ri.Get(ctx, cur.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return c.explain(gerr)
		}
		if !equality.Semantic.DeepEqual(fresh.Object["spec"], cur.Object["spec"]) {
			return exitError(exitConflict, fmt.Errorf("the spec of plugin %q changed while its module was uploaded (another upgrade?); run the upgrade again if it should still point at %s", cur.GetName(), digest))
		}
		cur = fresh
	}
}

func runPluginDescribe(ctx context.Context, o *clientOptions, name string, stdout io.Writer) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	obj, err := c.dynamic.Resource(pluginGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return exitError(exitNotFound, fmt.Errorf("no plugin %q; `setpoint plugin list` shows the installed ones", name))
		}
		return c.explain(err)
	}
	events := findEvents(ctx, c, obj)
	pal := paletteFor(stdout)
	var b strings.Builder
	field := func(k, v string) { fmt.Fprintf(&b, "%s %s\n", pal.bold(fmt.Sprintf("%-15s", k+":")), v) }
	get := func(path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		if v == nil {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		j, _ := json.Marshal(v)
		return string(j)
	}
	now := time.Now()
	field("Name", obj.GetName())
	field("Module", get("spec", "module", "digest"))
	field("Loaded module", orNone(get("status", "loadedDigest")))
	field("Preemption", orNone(get("status", "preemption")))
	field("Privileged", strconv.FormatBool(get("spec", "privileged") == "true"))
	field("Phase", orNone(get("status", "phase")))
	field("Calls", orNone(get("status", "calls")))
	field("Errors", orNone(get("status", "errors")))
	field("Last error", orNone(get("status", "lastError")))
	field("Created", duration.HumanDuration(now.Sub(obj.GetCreationTimestamp().Time))+" ago")
	if get("spec", "reconcile", "for") != "" {
		field("Leader", reconcileLeader(ctx, c, name, now))
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Bindings:"))
	bound := false
	if f := get("spec", "reconcile", "for"); f != "" {
		bound = true
		fmt.Fprintf(&b, "  reconciles %s", f)
		if owns, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "reconcile", "owns"); len(owns) > 0 {
			fmt.Fprintf(&b, ", owning %s", strings.Join(owns, ", "))
		}
		if w, ok, _ := unstructured.NestedInt64(obj.Object, "spec", "reconcile", "workers"); ok {
			fmt.Fprintf(&b, ", %d at once", w)
		}
		b.WriteString("\n")
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "admission")
	for _, r := range rules {
		m, _ := r.(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(m, "resources")
		ops, _, _ := unstructured.NestedStringSlice(m, "operations")
		if len(ops) == 0 {
			ops = []string{"CREATE", "UPDATE", "DELETE"}
		}
		bound = true
		fmt.Fprintf(&b, "  admits (%s, failure policy %s) %s of %s\n", strings.ToLower(str(m["type"])), orNone(str(m["failurePolicy"])),
			strings.Join(ops, ", "), strings.Join(res, ", "))
	}
	if !bound {
		b.WriteString("  <none>\n")
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Permissions:"))
	fmt.Fprintf(&b, "  read:  %s\n  write: %s\n", orNone(listOf(obj, "spec", "permissions", "read")), orNone(listOf(obj, "spec", "permissions", "write")))
	fmt.Fprintf(&b, "%s\n", pal.bold("Limits:"))
	fmt.Fprintf(&b, "  call timeout: %s\n  memory pages: %s\n  pool size:    %s\n",
		orDefault(get("spec", "limits", "callTimeout")), orDefault(get("spec", "limits", "memoryPages")), orDefault(get("spec", "limits", "poolSize")))
	if cfg, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "config"); len(cfg) > 0 {
		fmt.Fprintf(&b, "%s\n", pal.bold("Config:"))
		keys := make([]string, 0, len(cfg))
		for k := range cfg {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s=%s\n", k, cfg[k])
		}
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Conditions:"))
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if len(conds) == 0 {
		b.WriteString("  <none>\n")
	} else {
		rows := [][]string{{"  TYPE", "STATUS", "REASON", "MESSAGE"}}
		for _, cv := range conds {
			m, _ := cv.(map[string]any)
			rows = append(rows, []string{"  " + str(m["type"]), str(m["status"]), str(m["reason"]), str(m["message"])})
		}
		_ = writeAligned(&b, rows)
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Recent events:"))
	if len(events) == 0 {
		b.WriteString("  <none>\n")
	} else {
		rows := [][]string{{"  TYPE", "REASON", "AGE", "MESSAGE"}}
		for _, e := range events {
			rows = append(rows, []string{"  " + str(e.Object["type"]), str(e.Object["reason"]), eventAge(e, now), str(e.Object["message"])})
		}
		_ = writeAligned(&b, rows)
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// leaseGVR is the resource of the Leases that elect the replica running
// each plugin's reconcile controller.
var leaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// reconcileLeader says which replica runs the plugin name's reconcile
// controller: the holder of its Lease, default/setpoint-plugin.NAME, and
// when it last renewed it.
func reconcileLeader(ctx context.Context, c *client, name string, now time.Time) string {
	l, err := c.dynamic.Resource(leaseGVR).Namespace("default").Get(ctx, "setpoint-plugin."+name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "<none> (no lease: the server runs without --leader-elect, or no replica has campaigned yet)"
	case err != nil:
		return "<unknown> (read lease default/setpoint-plugin." + name + ": " + err.Error() + ")"
	}
	holder, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity")
	if holder == "" {
		return "<none> (lease default/setpoint-plugin." + name + " released)"
	}
	out := holder + " (lease default/setpoint-plugin." + name
	if rt, _, _ := unstructured.NestedString(l.Object, "spec", "renewTime"); rt != "" {
		if t, err := time.Parse(time.RFC3339Nano, rt); err == nil {
			out += ", renewed " + duration.HumanDuration(now.Sub(t)) + " ago"
		}
	}
	return out + ")"
}

func listOf(obj *unstructured.Unstructured, path ...string) string {
	l, _, _ := unstructured.NestedStringSlice(obj.Object, path...)
	return strings.Join(l, ", ")
}

func orDefault(s string) string {
	if s == "" {
		return "(server default)"
	}
	return s
}

// splitPermissions folds --permissions entries (read=RESOURCE, write=RESOURCE)
// into the --read and --write lists.
func (o *pluginOptions) splitPermissions() error {
	for _, p := range o.permissions {
		verb, res, ok := strings.Cut(strings.TrimSpace(p), "=")
		res = strings.TrimSpace(res)
		if !ok || res == "" {
			return usageError("--permissions %q: want read=RESOURCE or write=RESOURCE", p)
		}
		switch strings.ToLower(strings.TrimSpace(verb)) {
		case "read":
			o.read = append(o.read, res)
		case "write":
			o.write = append(o.write, res)
		default:
			return usageError("--permissions %q: %q is neither read nor write", p, verb)
		}
	}
	o.permissions = nil
	return nil
}
