package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
)

func newPluginApplyCommand() *cobra.Command {
	o := &pluginOptions{}
	cmd := &cobra.Command{
		Use:   "apply NAME --wasm FILE [install's flags]",
		Short: "Install a plugin, or bring an installed one to the module and spec given",
		Long: `Make the Plugin NAME run the module in --wasm with the spec that install's
flags describe: create it when it does not exist, change nothing when it
exists with that module and spec ("unchanged"), and otherwise upload the
module and replace its whole spec (bindings, permissions, limits, config,
privileged), as install would have written it. Unlike upgrade, flags left out
are removed from the spec.

` + pluginWaitHelp + `

` + exitCodeHelp,
		Example: `  setpoint plugin apply widget --wasm bin/wasm/widget-plugin.wasm --reconcile widgets --owns widgetprovisions`,
		Args:    rangeArgs(1, 1, "NAME --wasm FILE [flags]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginPut(cmd.Context(), o, args[0], true, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSpecFlags(cmd)
	return cmd
}

// checkSpecFlags refuses flags that describe no usable spec.
func (o *pluginOptions) checkSpecFlags() error {
	if o.reconcile == "" && len(o.admit) == 0 {
		return usageError("a plugin needs a binding: --reconcile RESOURCE and/or --admit RESOURCE")
	}
	if len(o.owns) > 0 && o.reconcile == "" {
		return usageError("--owns needs --reconcile")
	}
	if o.workers != 0 && o.reconcile == "" {
		return usageError("--workers (objects reconciled at once) needs --reconcile")
	}
	if o.workers < 0 || o.workers > 256 {
		return usageError("--workers %d: want 1 to 256", o.workers)
	}
	if o.failurePolicy != "Fail" && o.failurePolicy != "Ignore" {
		return usageError("--failure-policy %q: want Fail or Ignore", o.failurePolicy)
	}
	return o.splitPermissions()
}

// buildSpec is the Plugin spec the flags describe, without its module.
func (o *pluginOptions) buildSpec(c *client) (map[string]any, error) {
	spec := map[string]any{}
	if o.reconcile != "" {
		forName, err := c.resourceName(o.reconcile)
		if err != nil {
			return nil, err
		}
		rec := map[string]any{"for": forName}
		if len(o.owns) > 0 {
			if rec["owns"], err = c.resourceNames(o.owns); err != nil {
				return nil, err
			}
		}
		if o.workers != 0 {
			rec["workers"] = int64(o.workers)
		}
		spec["reconcile"] = rec
	}
	if len(o.admit) > 0 {
		res, err := c.resourceNames(o.admit)
		if err != nil {
			return nil, err
		}
		typ := "Validating"
		if o.mutating {
			typ = "Mutating"
		}
		rule := map[string]any{"resources": res, "type": typ, "failurePolicy": o.failurePolicy}
		if len(o.operations) > 0 {
			ops := make([]any, len(o.operations))
			for i, op := range o.operations {
				ops[i] = strings.ToUpper(op)
			}
			rule["operations"] = ops
		}
		spec["admission"] = []any{rule}
	}
	perms := map[string]any{}
	var err error
	if len(o.read) > 0 {
		if perms["read"], err = c.resourceNames(o.read); err != nil {
			return nil, err
		}
	}
	if len(o.write) > 0 {
		if perms["write"], err = c.resourceNames(o.write); err != nil {
			return nil, err
		}
	}
	if len(perms) > 0 {
		spec["permissions"] = perms
	}
	limits := map[string]any{}
	if o.callTimeout > 0 {
		limits["callTimeout"] = o.callTimeout.String()
	}
	if o.memoryPages > 0 {
		limits["memoryPages"] = int64(o.memoryPages)
	}
	if o.poolSize > 0 {
		limits["poolSize"] = int64(o.poolSize)
	}
	if len(limits) > 0 {
		spec["limits"] = limits
	}
	if len(o.config) > 0 {
		cfg := map[string]any{}
		for k, v := range o.config {
			cfg[k] = v
		}
		spec["config"] = cfg
	}
	if o.privileged {
		spec["privileged"] = true
	}
	return spec, nil
}

// runPluginPut installs the plugin name (install), or brings it to the spec
// the flags describe (apply, replace set). Either succeeds without a change
// when the Plugin exists with that module and spec.
func runPluginPut(ctx context.Context, o *pluginOptions, name string, replace bool, stdout, stderr io.Writer) error {
	if err := o.checkSpecFlags(); err != nil {
		return err
	}
	wasm, err := readModule(o.wasm)
	if err != nil {
		return err
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	spec, err := o.buildSpec(c)
	if err != nil {
		return err
	}
	digest := host.Digest(wasm)
	ri := c.dynamic.Resource(pluginGVR)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return c.explain(err)
	case cur.GetDeletionTimestamp() != nil:
		return exitError(exitConflict, fmt.Errorf("plugin %q is being deleted; `setpoint plugin uninstall %s` waits until it is gone", name, name))
	}
	spec["module"] = map[string]any{"digest": digest}
	if cur != nil {
		diff, err := specDiff(cur.Object["spec"], spec)
		if err != nil {
			return err
		}
		if len(diff) == 0 {
			fmt.Fprintf(stdout, "plugin.setpoint.dev/%s unchanged (module %s)\n", name, digest)
			if !o.wait {
				return nil
			}
			return waitLoaded(ctx, c, name, digest, o.timeout, stdout, stderr,
				fmt.Sprintf("the Plugin %s, which existed before, stays as it was", name))
		}
		if !replace {
			return exitError(exitConflict, fmt.Errorf("plugin %q exists already with another %s; `setpoint plugin upgrade %s --wasm FILE` switches its module, `setpoint plugin apply %s` with install's flags sets its whole spec",
				name, strings.Join(diff, ", "), name, name))
		}
	}
	delete(spec, "module") // uploaded below
	uploaded, err := uploadModule(ctx, c, o.wasm, wasm, limitsQuery(map[string]any{"spec": spec}), stderr)
	if err != nil {
		if cur == nil {
			return fmt.Errorf("%w; no Plugin was created", err)
		}
		return fmt.Errorf("%w; plugin %s is unchanged", err, name)
	}
	spec["module"] = map[string]any{"digest": uploaded}
	if cur == nil {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": pluginGVR.GroupVersion().String(),
			"kind":       "Plugin",
			"metadata":   map[string]any{"name": name},
			"spec":       spec,
		}}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: "setpoint"}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return exitError(exitConflict, fmt.Errorf("plugin %q was created by someone else meanwhile; run the command again", name))
			}
			return c.explain(err)
		}
		fmt.Fprintf(stdout, "plugin.setpoint.dev/%s created (module %s)\n", name, uploaded)
		if !o.wait {
			return nil
		}
		return waitLoaded(ctx, c, name, uploaded, o.timeout, stdout, stderr,
			fmt.Sprintf("the Plugin %s was created and stays: `setpoint plugin uninstall %s` removes it, `setpoint plugin apply %s ...` changes it", name, name, name))
	}
	old, _, _ := unstructured.NestedString(cur.Object, "spec", "module", "digest")
	if err := replacePluginSpec(ctx, c, ri, cur, spec); err != nil {
		return err
	}
	if old == uploaded {
		fmt.Fprintf(stdout, "plugin.setpoint.dev/%s configured (module %s)\n", name, uploaded)
	} else {
		fmt.Fprintf(stdout, "plugin.setpoint.dev/%s configured: module %s -> %s\n", name, old, uploaded)
	}
	if !o.wait {
		return nil
	}
	return waitLoaded(ctx, c, name, uploaded, o.timeout, stdout, stderr,
		fmt.Sprintf("the Plugin %s stays with the new spec; apply it again with a fixed module or flags, or `setpoint plugin uninstall %s`", name, name))
}

// replacePluginSpec writes spec as the whole spec of the Plugin cur, pinned
// to the spec read: the server's status writes move the resourceVersion, so
// a conflict is retried while the spec is still the one read.
func replacePluginSpec(ctx context.Context, c *client, ri dynamic.ResourceInterface, cur *unstructured.Unstructured, spec map[string]any) error {
	for attempt := 0; ; attempt++ {
		next := cur.DeepCopy()
		next.Object["spec"] = spec
		_, err := ri.Update(ctx, next, metav1.UpdateOptions{FieldManager: "setpoint"})
		if err == nil || !apierrors.IsConflict(err) || attempt == 10 {
			return c.explain(err)
		}
		fresh, gerr := ri.Get(ctx, cur.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return c.explain(gerr)
		}
		if !reflect.DeepEqual(fresh.Object["spec"], cur.Object["spec"]) {
			return exitError(exitConflict, fmt.Errorf("the spec of plugin %q changed while its module was uploaded; run the command again", cur.GetName()))
		}
		cur = fresh
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

// specDiff names the parts of a Plugin spec (module, reconcile, admission,
// permissions, limits, config, privileged) in which have and want differ,
// read as the server reads them: the order of lists of names, empty lists
// and maps, an omitted failure policy (Fail) and how a duration is spelled
// do not count.
func specDiff(have, want any) ([]string, error) {
	h, err := normalSpec(have)
	if err != nil {
		return nil, err
	}
	w, err := normalSpec(want)
	if err != nil {
		return nil, err
	}
	var diff []string
	hv, wv := reflect.ValueOf(h), reflect.ValueOf(w)
	for i := range hv.NumField() {
		if !reflect.DeepEqual(hv.Field(i).Interface(), wv.Field(i).Interface()) {
			tag, _, _ := strings.Cut(hv.Type().Field(i).Tag.Get("json"), ",")
			diff = append(diff, tag)
		}
	}
	return diff, nil
}

func normalSpec(v any) (plugins.Spec, error) {
	var sp plugins.Spec
	b, err := json.Marshal(v)
	if err != nil {
		return sp, err
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return sp, fmt.Errorf("read a Plugin spec: %w", err)
	}
	names := func(l []string) []string {
		if len(l) == 0 {
			return nil
		}
		l = slices.Clone(l)
		slices.Sort(l)
		return slices.Compact(l)
	}
	if sp.Reconcile != nil {
		sp.Reconcile.Owns = names(sp.Reconcile.Owns)
	}
	if len(sp.Admission) == 0 {
		sp.Admission = nil
	}
	for i, r := range sp.Admission {
		r.Resources = names(r.Resources)
		for j, op := range r.Operations {
			r.Operations[j] = strings.ToUpper(op)
		}
		r.Operations = names(r.Operations)
		if slices.Equal(r.Operations, []string{"CREATE", "DELETE", "UPDATE"}) {
			r.Operations = nil // all of them, as when none is named
		}
		if r.FailurePolicy == "" {
			r.FailurePolicy = plugins.Fail
		}
		sp.Admission[i] = r
	}
	sp.Permissions.Read, sp.Permissions.Write = names(sp.Permissions.Read), names(sp.Permissions.Write)
	if d, err := time.ParseDuration(sp.Limits.CallTimeout); err == nil {
		sp.Limits.CallTimeout = d.String()
	}
	if len(sp.Config) == 0 {
		sp.Config = nil
	}
	return sp, nil
}
