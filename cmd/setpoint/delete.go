package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func init() { subcommands = append(subcommands, newDeleteCommand) }

type deleteOptions struct {
	client         clientOptions
	files          []string
	recursive      bool
	selector       string
	all            bool
	wait           bool
	timeout        time.Duration
	ignoreNotFound bool
	cascade        string
	dryRun         string
}

func newDeleteCommand() *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete (RESOURCE NAME... | RESOURCE -l SELECTOR | -f FILE)",
		Short: "Delete objects by name, by label selector or from manifests",
		Long: `Delete objects named on the command line, those matching a label selector, or
those in manifests (-f, as for apply).

An object with finalizers is only marked for deletion (it gets a
deletionTimestamp) until its finalizers are removed; --wait waits until it is
really gone. Dependents (objects whose ownerReferences name it) are deleted by
the garbage collector; --cascade chooses how.

` + exitCodeHelp,
		Example: `  setpoint delete widget foo
  setpoint delete widgets -l env=dev
  setpoint delete -f widgets.yaml --wait`,
		Args: rangeArgs(0, -1, "(RESOURCE NAME... | RESOURCE -l SELECTOR | -f FILE)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDelete(cmd.Context(), o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "delete the objects in this manifest file, directory, or - for stdin (repeatable)")
	f.BoolVarP(&o.recursive, "recursive", "R", false, "also read the manifests in subdirectories of a -f directory")
	f.StringVarP(&o.selector, "selector", "l", "", "delete the objects of RESOURCE matching this label selector")
	f.BoolVar(&o.all, "all", false, "delete every object of RESOURCE in the namespace")
	f.BoolVar(&o.wait, "wait", false, "wait until the objects are gone (finalizers run, foreground deletion done)")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "how long --wait waits")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "succeed when an object does not exist")
	f.StringVar(&o.dryRun, "dry-run", "none", "none, or server: the server checks each delete and removes nothing")
	f.StringVar(&o.cascade, "cascade", "background", "how dependents go: background, foreground (the object waits for them) or orphan (they stay)")
	return cmd
}

// target is one object to delete.
type target struct {
	r    resource
	ns   string
	name string
}

func runDelete(ctx context.Context, o *deleteOptions, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var policy metav1.DeletionPropagation
	switch o.cascade {
	case "background", "true":
		policy = metav1.DeletePropagationBackground
	case "foreground":
		policy = metav1.DeletePropagationForeground
	case "orphan", "false":
		policy = metav1.DeletePropagationOrphan
	default:
		return usageError("--cascade %q: want background, foreground or orphan", o.cascade)
	}
	dryRun, suffix, err := parseDryRun(o.dryRun)
	if err != nil {
		return err
	}
	if dryRun != nil && o.wait {
		return usageError("--wait has nothing to wait for with --dry-run")
	}
	byFile := len(o.files) > 0
	switch {
	case byFile && len(args) > 0:
		return usageError("pass either -f or RESOURCE arguments, not both")
	case byFile && (o.selector != "" || o.all):
		return usageError("-l and --all select within a RESOURCE; they do not combine with -f")
	case !byFile && len(args) == 0:
		return usageError("nothing to delete: pass RESOURCE NAME..., RESOURCE -l SELECTOR, or -f FILE")
	}
	if err := checkSelectors(o.selector, ""); err != nil {
		return err
	}
	var ms []manifest
	if byFile {
		var err error
		if ms, err = readManifests(o.files, o.recursive, stdin); err != nil {
			return err
		}
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}

	var targets []target
	if byFile {
		for _, m := range ms {
			r, err := c.resourceForKind(m.obj.GroupVersionKind())
			if err != nil {
				if meta.IsNoMatchError(err) {
					if o.ignoreNotFound {
						continue
					}
					return exitError(exitNotFound, fmt.Errorf("%s: the server does not serve kind %q in %q", m.where(), m.obj.GetKind(), m.obj.GetAPIVersion()))
				}
				return c.explain(err)
			}
			ns := ""
			if r.namespaced {
				ns = firstNonEmpty(m.obj.GetNamespace(), c.namespace)
			}
			targets = append(targets, target{r: r, ns: ns, name: m.obj.GetName()})
		}
		// Objects before the kinds and namespaces that hold them.
		for i, j := 0, len(targets)-1; i < j; i, j = i+1, j-1 {
			targets[i], targets[j] = targets[j], targets[i]
		}
	} else {
		resArg, names, err := splitResourceArgs(args)
		if err != nil {
			return err
		}
		if (o.selector != "" || o.all) && len(names) > 0 {
			return usageError("pass either names or -l/--all, not both")
		}
		if o.selector == "" && !o.all && len(names) == 0 {
			return usageError("name the objects to delete, or select them with -l SELECTOR (or --all)")
		}
		r, err := c.resolve(resArg)
		if err != nil {
			return err
		}
		ns := ""
		if r.namespaced {
			ns = c.namespace
		}
		if len(names) == 0 {
			list, err := c.resourceInterface(r, ns).List(ctx, metav1.ListOptions{LabelSelector: o.selector})
			if err != nil {
				if err = c.explain(err); exitCode(err) == exitInvalid {
					err = exitError(exitUsage, err) // the server refused the selector
				}
				return err
			}
			if len(list.Items) == 0 {
				fmt.Fprintln(stderr, noneFound(r, ns))
			}
			for _, it := range list.Items {
				names = append(names, it.GetName())
			}
		}
		for _, n := range names {
			targets = append(targets, target{r: r, ns: ns, name: n})
		}
	}

	var firstErr error
	var deleted []target
	for _, t := range targets {
		err := c.resourceInterface(t.r, t.ns).Delete(ctx, t.name, metav1.DeleteOptions{PropagationPolicy: &policy, DryRun: dryRun})
		switch {
		case apierrors.IsNotFound(err) && o.ignoreNotFound:
			continue
		case err != nil:
			err = c.explain(err)
			if code := exitCode(err); code == exitUnreachable || code == exitDenied {
				return err // every other object would fail the same way
			}
			fmt.Fprintf(stderr, "%s %v\n", paletteFor(stderr).red("error:"), err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		fmt.Fprintf(stdout, "%s deleted%s\n", t.r.objectName(t.name), suffix)
		deleted = append(deleted, t)
	}
	if o.wait && len(deleted) > 0 {
		if err := waitDeleted(ctx, c, deleted, o.timeout); err != nil {
			return err
		}
	}
	if firstErr != nil {
		return exitError(exitCode(firstErr), silent{errors.New("some objects were not deleted")})
	}
	return nil
}

// waitDeleted polls until every target is gone, for at most timeout.
func waitDeleted(ctx context.Context, c *client, targets []target, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, t := range targets {
		var last *unstructured.Unstructured // as last seen, for the message
		for {
			obj, err := c.resourceInterface(t.r, t.ns).Get(ctx, t.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if err != nil {
				return c.explain(err)
			}
			last = obj
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return exitError(exitFailure, fmt.Errorf("%s still exists after %v%s", t.r.objectName(t.name), timeout, pendingFinalizers(last)))
			}
		}
	}
	return nil
}

func pendingFinalizers(obj *unstructured.Unstructured) string {
	if obj == nil || len(obj.GetFinalizers()) == 0 {
		return ""
	}
	return fmt.Sprintf(" (finalizers pending: %v)", obj.GetFinalizers())
}
