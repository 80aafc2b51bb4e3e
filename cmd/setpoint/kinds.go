package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

func init() { subcommands = append(subcommands, newKindsCommand) }

type kindsOptions struct {
	client clientOptions
	output string
}

func newKindsCommand() *cobra.Command {
	o := &kindsOptions{}
	cmd := &cobra.Command{
		Use:     "kinds",
		Aliases: []string{"api-resources"},
		Short:   "List the kinds the server serves",
		Long: `List the resources the server serves, with the names get, describe and delete
accept (plural, short names, kind), their API version and whether they live in
a namespace. Kinds registered with a CustomResourceDefinition appear as soon as
it is established.

` + exitCodeHelp,
		Example: `  setpoint kinds
  setpoint kinds -o wide   # with the verbs each supports
  setpoint kinds -o name`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKinds(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: table, wide or name")
	return cmd
}

type kindRow struct {
	gv  schema.GroupVersion
	res metav1.APIResource
}

func runKinds(o *kindsOptions, stdout, stderr io.Writer) error {
	switch o.output {
	case "", "table", "wide", "name":
	default:
		return usageError("-o %q: want table, wide or name", o.output)
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return c.explain(err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warning: %v\n", err)
	}
	var rows []kindRow
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			// Subresources, and resources that hold no objects (the
			// create-only self reviews behind `kubectl auth`), are no kinds.
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "get") {
				continue
			}
			rows = append(rows, kindRow{gv: gv, res: r})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].gv.Group != rows[j].gv.Group {
			return rows[i].gv.Group < rows[j].gv.Group
		}
		return rows[i].res.Name < rows[j].res.Name
	})
	if o.output == "name" {
		for _, r := range rows {
			name := r.res.Name
			if r.gv.Group != "" {
				name += "." + r.gv.Group
			}
			fmt.Fprintln(stdout, name)
		}
		return nil
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name"}, {Name: "Shortnames"}, {Name: "Apiversion"}, {Name: "Namespaced"}, {Name: "Kind"}, {Name: "Verbs", Priority: 1},
	}}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			r.res.Name, strings.Join(r.res.ShortNames, ","), r.gv.String(), strconv.FormatBool(r.res.Namespaced), r.res.Kind,
			"[" + strings.Join(r.res.Verbs, " ") + "]",
		}})
	}
	return printPlainTable(stdout, t, o.output == "wide")
}

// printPlainTable prints a table that has no objects behind its rows, so no
// AGE column is added.
func printPlainTable(w io.Writer, t *metav1.Table, wide bool) error {
	var header []string
	var keep []int
	for i, col := range t.ColumnDefinitions {
		if col.Priority > 0 && !wide {
			continue
		}
		keep = append(keep, i)
		header = append(header, strings.ToUpper(col.Name))
	}
	rows := [][]string{header}
	for _, r := range t.Rows {
		var cells []string
		for _, i := range keep {
			s := fmt.Sprint(r.Cells[i])
			cells = append(cells, s)
		}
		rows = append(rows, cells)
	}
	return writeAligned(w, rows)
}

// writeAligned prints rows with columns padded to the widest cell plus three
// spaces, as kubectl does.
func writeAligned(w io.Writer, rows [][]string) error {
	var b strings.Builder
	widths := []int{}
	for _, r := range rows {
		for i, c := range r {
			n := len([]rune(c))
			if i >= len(widths) {
				widths = append(widths, n)
			} else if n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+3))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
