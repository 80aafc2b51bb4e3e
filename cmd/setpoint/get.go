package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

func init() { subcommands = append(subcommands, newGetCommand) }

type getOptions struct {
	client        clientOptions
	allNamespaces bool
	selector      string
	fieldSelector string
	output        string
	watch         bool
	watchOnly     bool
	watchEvents   bool
	noHeaders     bool
	showLabels    bool
}

func newGetCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get RESOURCE [NAME...]",
		Short: "List objects, or show some by name",
		Long: `List the objects of a resource, or show the named ones. RESOURCE is what kubectl
accepts: the plural (widgets), the singular (widget), the kind (Widget), a short
name (wg), optionally qualified by group (widgets.example.setpoint.dev);
RESOURCE/NAME works too, and RESOURCE,RESOURCE lists several. ` + "`setpoint kinds`" + `
lists them.

The table has the columns the server declares for the kind (a
CustomResourceDefinition's additionalPrinterColumns) and AGE; -o wide adds the
columns of lower priority. -w keeps watching and prints each change.

` + exitCodeHelp,
		Example: `  setpoint get widgets
  setpoint get widget foo -o yaml
  setpoint get wg -A -l 'env in (dev,prod)'
  setpoint get widgets,widgetprovisions
  setpoint get widgets -o jsonpath='{.items[*].metadata.name}'
  setpoint get widgets -w`,
		Args: rangeArgs(1, -1, "RESOURCE [NAME...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runGet(ctx, o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list across all namespaces")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector: key=value, key!=value, key in (a,b), key notin (a,b), key, !key")
	f.StringVar(&o.fieldSelector, "field-selector", "", "field selector on metadata.name or metadata.namespace")
	f.StringVarP(&o.output, "output", "o", "", outputHelp)
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, watch for changes and print each")
	f.BoolVar(&o.watchOnly, "watch-only", false, "watch for changes without listing first")
	f.BoolVar(&o.watchEvents, "output-watch-events", false, "with --watch, print the event type (ADDED, MODIFIED, DELETED) of each change")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print tables without their header")
	f.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column to tables")
	return cmd
}

// checkSelectors parses -l and --field-selector as the server will, so that
// a selector that does not parse is a usage error found before anything is
// sent.
func checkSelectors(label, field string) error {
	if _, err := k8slabels.Parse(label); err != nil {
		return usageError("invalid label selector %q: %v", label, err)
	}
	if _, err := fields.ParseSelector(field); err != nil {
		return usageError("invalid field selector %q: %v", field, err)
	}
	return nil
}

// splitResourceArgs accepts RESOURCE NAME... and RESOURCE/NAME forms.
func splitResourceArgs(args []string) (string, []string, error) {
	if res, name, ok := strings.Cut(args[0], "/"); ok {
		if name == "" || len(args) > 1 {
			return "", nil, usageError("use either RESOURCE NAME... or RESOURCE/NAME")
		}
		return res, []string{name}, nil
	}
	return args[0], args[1:], nil
}

func runGet(ctx context.Context, o *getOptions, args []string, stdout, stderr io.Writer) (err error) {
	defer func() {
		// get writes nothing, so a request the server rejects as invalid
		// (400: a field selector on a field the kind does not index, say)
		// is a mistake in the command line, not an invalid object.
		if exitCode(err) == exitInvalid {
			err = exitError(exitUsage, err)
		}
	}()
	out, err := parseOutput(o.output)
	if err != nil {
		return err
	}
	if err := checkSelectors(o.selector, o.fieldSelector); err != nil {
		return err
	}
	resArg, names, err := splitResourceArgs(args)
	if err != nil {
		return err
	}
	if o.allNamespaces && len(names) > 0 {
		return usageError("-A lists; it cannot be combined with names")
	}
	if o.watchOnly {
		o.watch = true
	}
	if o.watch && len(names) > 1 {
		return usageError("--watch takes at most one name")
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	if strings.Contains(resArg, ",") {
		if len(names) > 0 || o.watch {
			return usageError("several resources (%s) can be listed, not named or watched", resArg)
		}
		return getSeveral(ctx, c, o, strings.Split(resArg, ","), out, stdout, stderr)
	}
	r, err := c.resolve(resArg)
	if err != nil {
		return err
	}
	ns := c.namespace
	if o.allNamespaces || !r.namespaced {
		ns = ""
	}
	opts := metav1.ListOptions{LabelSelector: o.selector, FieldSelector: o.fieldSelector}
	tp := &tablePrinter{w: stdout, wide: out.format == "wide", withNamespace: o.allNamespaces && r.namespaced,
		withEvent: o.watchEvents, showLabels: o.showLabels, noHeaders: o.noHeaders, now: time.Now}

	rv := ""
	if !o.watchOnly {
		if rv, err = getOnce(ctx, c, r, ns, names, opts, out, tp, stdout, stderr); err != nil {
			return err
		}
	}
	if !o.watch {
		return nil
	}
	if rv == "" {
		// Start the watch at the current revision: a watch without one
		// would first replay every object as ADDED.
		list, err := c.resourceInterface(r, ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector})
		if err != nil {
			return c.explain(err)
		}
		rv = list.GetResourceVersion()
	}
	if len(names) == 1 {
		sel := fields.OneTermEqualSelector("metadata.name", names[0]).String()
		if opts.FieldSelector != "" {
			sel = opts.FieldSelector + "," + sel
		}
		opts.FieldSelector = sel
	}
	return watchAndPrint(ctx, c, r, ns, opts, rv, out, tp, stdout)
}

// getOnce prints the current state and returns the revision it was read at.
func getOnce(ctx context.Context, c *client, r resource, ns string, names []string, opts metav1.ListOptions,
	out output, tp *tablePrinter, stdout, stderr io.Writer) (string, error) {
	ri := c.resourceInterface(r, ns)
	switch out.format {
	case "table", "wide":
		if len(names) == 0 {
			t, err := c.table(ctx, r, ns, "", opts)
			if err != nil {
				return "", err
			}
			if len(t.Rows) == 0 {
				fmt.Fprintln(stderr, noneFound(r, ns))
			} else if err := tp.print(t, "ADDED"); err != nil {
				return "", err
			}
			return t.ResourceVersion, nil
		}
		var firstErr error
		for _, name := range names {
			t, err := c.table(ctx, r, ns, name, opts)
			if err != nil && len(names) == 1 {
				return "", err
			}
			if err != nil {
				fmt.Fprintf(stderr, "%s %v\n", paletteFor(stderr).red("error:"), err)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if err := tp.print(t, "ADDED"); err != nil {
				return "", err
			}
		}
		if firstErr != nil {
			return "", exitError(exitCode(firstErr), silent{errors.New("some objects could not be read")})
		}
		return "", nil
	}

	var items []unstructured.Unstructured
	rv := ""
	if len(names) == 0 {
		list, err := ri.List(ctx, opts)
		if err != nil {
			return "", c.explain(err)
		}
		items, rv = list.Items, list.GetResourceVersion()
		if len(items) == 0 && out.format == "name" {
			fmt.Fprintln(stderr, noneFound(r, ns))
		}
	} else {
		for _, name := range names {
			obj, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", c.explain(err)
			}
			items = append(items, *obj)
		}
	}
	if out.format == "name" {
		for _, it := range items {
			fmt.Fprintln(stdout, r.objectName(it.GetName()))
		}
		return rv, nil
	}
	if len(names) == 1 {
		cleanForOutput(&items[0])
		return rv, printObject(stdout, out, items[0].Object)
	}
	return rv, printObject(stdout, out, listObject(items))
}

func noneFound(r resource, ns string) string {
	if r.namespaced && ns != "" {
		return fmt.Sprintf("No resources found in %s namespace.", ns)
	}
	return "No resources found"
}

// watchAndPrint follows changes from rv until ctx ends, resuming after a
// dropped connection and listing again when the revision is gone.
func watchAndPrint(ctx context.Context, c *client, r resource, ns string, opts metav1.ListOptions, rv string,
	out output, tp *tablePrinter, stdout io.Writer) error {
	ri := c.resourceInterface(r, ns)
	rows := map[string]*metav1.Table{} // last row printed per object, for deletes
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	for {
		wopts := opts
		wopts.ResourceVersion = rv
		wopts.AllowWatchBookmarks = true
		w, err := ri.Watch(ctx, wopts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return c.explain(err)
		}
		gone := false
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Bookmark:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					rv = u.GetResourceVersion()
				}
				continue
			case watch.Error:
				if st := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					gone = true
				}
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if err := printEvent(ctx, c, r, ev.Type, u, out, tp, rows, stdout); err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil
		}
		if gone {
			rv = "" // the revision was compacted: start from now
		}
		retry.Reset(time.Second)
		select {
		case <-ctx.Done():
			return nil
		case <-retry.C:
		}
	}
}

func printEvent(ctx context.Context, c *client, r resource, typ watch.EventType, u *unstructured.Unstructured,
	out output, tp *tablePrinter, rows map[string]*metav1.Table, stdout io.Writer) error {
	key := u.GetNamespace() + "/" + u.GetName()
	switch out.format {
	case "table", "wide":
		t := rows[key]
		if typ != watch.Deleted {
			fresh, err := c.table(ctx, r, u.GetNamespace(), u.GetName(), metav1.ListOptions{})
			if err == nil {
				t = fresh
			} else if t == nil {
				t = &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}},
					Rows: []metav1.TableRow{{Cells: []any{u.GetName()}}}}
			}
			rows[key] = t
		} else {
			delete(rows, key)
			if t == nil {
				t = &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}},
					Rows: []metav1.TableRow{{Cells: []any{u.GetName()}}}}
			}
		}
		return tp.print(t, string(typ))
	case "name":
		prefix := ""
		if tp.withEvent {
			prefix = string(typ) + " "
		}
		_, err := fmt.Fprintln(stdout, prefix+r.objectName(u.GetName()))
		return err
	case "yaml":
		cleanForOutput(u)
		if _, err := fmt.Fprintln(stdout, "---"); err != nil {
			return err
		}
		return printObject(stdout, out, eventObject(typ, u, tp.withEvent))
	default:
		cleanForOutput(u)
		return printObject(stdout, out, eventObject(typ, u, tp.withEvent))
	}
}

func eventObject(typ watch.EventType, u *unstructured.Unstructured, withEvent bool) map[string]any {
	if withEvent {
		return map[string]any{"type": string(typ), "object": u.Object}
	}
	return u.Object
}

// getSeveral lists several resources (get widgets,namespaces): one table
// each, or one List of all their objects.
func getSeveral(ctx context.Context, c *client, o *getOptions, args []string, out output, stdout, stderr io.Writer) error {
	var rs []resource
	for _, a := range args {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		r, err := c.resolve(a)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	opts := metav1.ListOptions{LabelSelector: o.selector, FieldSelector: o.fieldSelector}
	nsOf := func(r resource) string {
		if o.allNamespaces || !r.namespaced {
			return ""
		}
		return c.namespace
	}
	var all []unstructured.Unstructured
	printed := false
	for _, r := range rs {
		switch out.format {
		case "table", "wide":
			t, err := c.table(ctx, r, nsOf(r), "", opts)
			if err != nil {
				return err
			}
			if len(t.Rows) == 0 {
				continue
			}
			// A NAME qualified by the resource tells the tables apart.
			for i := range t.Rows {
				if len(t.Rows[i].Cells) > 0 {
					t.Rows[i].Cells[0] = r.objectName(fmt.Sprint(t.Rows[i].Cells[0]))
				}
			}
			if printed {
				fmt.Fprintln(stdout)
			}
			tp := &tablePrinter{w: stdout, wide: out.format == "wide", withNamespace: o.allNamespaces && r.namespaced,
				showLabels: o.showLabels, noHeaders: o.noHeaders, now: time.Now}
			if err := tp.print(t, ""); err != nil {
				return err
			}
			printed = true
		default:
			list, err := c.resourceInterface(r, nsOf(r)).List(ctx, opts)
			if err != nil {
				return c.explain(err)
			}
			for _, it := range list.Items {
				if out.format == "name" {
					fmt.Fprintln(stdout, r.objectName(it.GetName()))
					printed = true
				}
			}
			all = append(all, list.Items...)
		}
	}
	if out.format != "table" && out.format != "wide" && out.format != "name" {
		return printObject(stdout, out, listObject(all))
	}
	if !printed {
		fmt.Fprintln(stderr, noneFound(rs[0], c.namespace))
	}
	return nil
}
