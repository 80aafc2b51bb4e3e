package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func init() { subcommands = append(subcommands, newScaleCommand) }

type scaleOptions struct {
	client          clientOptions
	replicas        int
	currentReplicas int
}

func newScaleCommand() *cobra.Command {
	o := &scaleOptions{}
	cmd := &cobra.Command{
		Use:   "scale (RESOURCE NAME | RESOURCE/NAME) --replicas=N",
		Short: "Set the replica count of an object whose kind has the scale subresource",
		Long: `Set spec.replicas (or the path the kind's scale subresource names) through the
/scale subresource, as kubectl scale does. --current-replicas makes it a
compare-and-set: the write is refused (exit 5) unless the count is that.

` + exitCodeHelp,
		Example: `  setpoint scale replicagroup web --replicas=5
  setpoint scale replicagroup/web --replicas=3 --current-replicas=5`,
		Args: rangeArgs(1, 2, "(RESOURCE NAME | RESOURCE/NAME) --replicas=N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScale(cmd.Context(), o, args, cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	cmd.Flags().IntVar(&o.replicas, "replicas", -1, "the new replica count (required)")
	cmd.Flags().IntVar(&o.currentReplicas, "current-replicas", -1, "only scale when the current count is this")
	return cmd
}

func runScale(ctx context.Context, o *scaleOptions, args []string, stdout io.Writer) error {
	if o.replicas < 0 {
		return usageError("--replicas=N is required (N >= 0)")
	}
	res, name, err := oneObject(args)
	if err != nil {
		return err
	}
	c, r, ri, err := o.client.connectTo(res)
	if err != nil {
		return err
	}
	scale, err := ri.Get(ctx, name, metav1.GetOptions{}, "scale")
	if apierrors.IsNotFound(err) {
		// Tell an absent object from a kind without /scale.
		if _, gerr := ri.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			return exitError(exitNotFound, fmt.Errorf("%s has no scale subresource: its CustomResourceDefinition does not declare subresources.scale", r.qualified()))
		}
	}
	if err != nil {
		return c.explain(err)
	}
	if o.currentReplicas >= 0 {
		cur, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
		if cur != int64(o.currentReplicas) {
			return exitError(exitConflict, fmt.Errorf("%s has %d replicas, not %d (--current-replicas)", r.objectName(name), cur, o.currentReplicas))
		}
	}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, o.replicas)
	if o.currentReplicas >= 0 { // compare-and-set on the version read
		patch = fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, scale.GetResourceVersion(), o.replicas)
	}
	if _, err := ri.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "setpoint"}, "scale"); err != nil {
		return c.explain(err)
	}
	fmt.Fprintf(stdout, "%s scaled\n", r.objectName(name))
	return nil
}
