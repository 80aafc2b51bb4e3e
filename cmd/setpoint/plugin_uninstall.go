package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

type pluginUninstallOptions struct {
	client  clientOptions
	wait    bool
	timeout time.Duration
}

func newPluginUninstallCommand() *cobra.Command {
	o := &pluginUninstallOptions{}
	cmd := &cobra.Command{
		Use:     "uninstall NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a Plugin: its bindings stop and its module is no longer run",
		Long: `Delete the Plugin NAME. The server stops its admission rules and its reconcile
controller and unloads its module; with --wait (the default) the command
returns once the Plugin is gone. The module itself is deleted later by the
server once no Plugin uses it.

A plugin that exports finalize puts the finalizer setpoint.dev/NAME on the
objects it reconciles. The server leaves that finalizer in place when the
plugin goes (as when a Kubernetes operator is uninstalled before its
resources): deleting such an object then waits until the finalizer is
removed, and the plugin's cleanup for it does not run. uninstall lists the
objects that still carry it and the command that releases each; installing
the plugin again resumes their cleanup instead. To let the plugin clean up,
delete those objects before uninstalling it.

` + exitCodeHelp,
		Example: `  setpoint plugin uninstall widget
  setpoint plugin delete widget --wait=false`,
		Args: rangeArgs(1, 1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginUninstall(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait until the Plugin is gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "how long --wait waits")
	return cmd
}

// releaseListed bounds the release commands uninstall prints.
const releaseListed = 20

func runPluginUninstall(ctx context.Context, o *pluginUninstallOptions, name string, stdout, stderr io.Writer) error {
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	ri := c.dynamic.Resource(pluginGVR)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return exitError(exitNotFound, fmt.Errorf("no plugin %q; `setpoint plugin list` shows the installed ones", name))
		}
		return c.explain(err)
	}
	uid := cur.GetUID()
	err = ri.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return exitError(exitNotFound, fmt.Errorf("no plugin %q; `setpoint plugin list` shows the installed ones", name))
	}
	if err != nil {
		return c.explain(err)
	}
	fmt.Fprintf(stdout, "plugin.setpoint.dev/%s deleted\n", name)
	if o.wait {
		if err := waitPluginGone(ctx, c, name, uid, o.timeout, stderr); err != nil {
			return err
		}
	}
	forRes, _, _ := unstructured.NestedString(cur.Object, "spec", "reconcile", "for")
	if forRes == "" {
		return nil
	}
	return reportFinalizerLeft(ctx, c, forRes, "setpoint.dev/"+name, stderr)
}

// waitPluginGone waits until the Plugin name with uid no longer exists.
func waitPluginGone(ctx context.Context, c *client, name string, uid types.UID, timeout time.Duration, stderr io.Writer) error {
	ph := startPhase(stderr, "waiting for the server to unload plugin "+name)
	defer ph.end("failed")
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ri := c.dynamic.Resource(pluginGVR)
	for {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && obj.GetUID() != uid) {
			ph.end("done")
			return nil
		}
		if err != nil {
			return c.explain(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			ph.end("timed out")
			return fmt.Errorf("plugin %s is still there after %v (finalizers %s): the server has not unloaded it; is it running?",
				name, timeout, strings.Join(obj.GetFinalizers(), ", "))
		}
	}
}

// reportFinalizerLeft tells on stderr which objects of the resource forRes
// (plural.group) still carry finalizer, and how to release each.
func reportFinalizerLeft(ctx context.Context, c *client, forRes, finalizer string, stderr io.Writer) error {
	r, err := c.resourceFor(schema.ParseGroupResource(forRes).WithVersion(""))
	if err != nil {
		// The kind is gone, and its objects with it.
		return nil
	}
	list, err := c.resourceInterface(r, "").List(ctx, metav1.ListOptions{})
	if err != nil {
		return c.explain(err)
	}
	var held []unstructured.Unstructured
	deleting := 0
	for _, obj := range list.Items {
		if slices.Contains(obj.GetFinalizers(), finalizer) {
			held = append(held, obj)
			if obj.GetDeletionTimestamp() != nil {
				deleting++
			}
		}
	}
	if len(held) == 0 {
		fmt.Fprintf(stderr, "no %s object carries the finalizer %s\n", forRes, finalizer)
		return nil
	}
	fmt.Fprintf(stderr, "Warning: the finalizer %s stays on %d %s object(s), %d of them being deleted: nothing removes it now, so deleting one waits until it is removed, and the plugin's cleanup for it does not run. Installing the plugin again resumes the cleanup; to release them without it:\n",
		finalizer, len(held), forRes, deleting)
	for i, obj := range held {
		if i == releaseListed {
			fmt.Fprintf(stderr, "  ... and %d more\n", len(held)-releaseListed)
			break
		}
		fmt.Fprintf(stderr, "  %s\n", releaseCommand(forRes, obj, finalizer))
	}
	return nil
}

// releaseCommand is the kubectl command that removes finalizer from obj,
// testing first that it is still at the index read, so that a finalizer
// added or removed meanwhile makes it fail rather than remove another.
func releaseCommand(resource string, obj unstructured.Unstructured, finalizer string) string {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": finalizer},
		{"op": "remove", "path": path},
	})
	ns := ""
	if obj.GetNamespace() != "" {
		ns = " -n " + obj.GetNamespace()
	}
	return fmt.Sprintf("kubectl patch %s %s%s --type=json -p '%s'", resource, obj.GetName(), ns, patch)
}
