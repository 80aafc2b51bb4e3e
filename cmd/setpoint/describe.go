package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

func init() { subcommands = append(subcommands, newDescribeCommand) }

type describeOptions struct {
	client clientOptions
}

func newDescribeCommand() *cobra.Command {
	o := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe RESOURCE NAME",
		Short: "Show an object in detail: spec, status, conditions, events, owners and children",
		Long: `Show one object for a person to read: its metadata, spec and status, its
conditions as a table, the events about it, the objects that own it and the
objects it owns (its children, found by their ownerReferences).

` + exitCodeHelp,
		Example: `  setpoint describe widget foo
  setpoint describe widgets/foo -n prod`,
		Args: rangeArgs(1, 2, "RESOURCE NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDescribe(cmd.Context(), o, args, cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	addNamespaceFlag(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	return cmd
}

func runDescribe(ctx context.Context, o *describeOptions, args []string, stdout io.Writer) error {
	resArg, names, err := splitResourceArgs(args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageError("usage: setpoint describe RESOURCE NAME")
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	r, err := c.resolve(resArg)
	if err != nil {
		return err
	}
	ns := ""
	if r.namespaced {
		ns = c.namespace
	}
	obj, err := c.resourceInterface(r, ns).Get(ctx, names[0], metav1.GetOptions{})
	if err != nil {
		return c.explain(err)
	}
	var children []string
	var events []unstructured.Unstructured
	var wg sync.WaitGroup
	wg.Go(func() { children = findChildren(ctx, c, obj) })
	wg.Go(func() { events = findEvents(ctx, c, obj) })
	wg.Wait()

	pal := paletteFor(stdout)
	var b strings.Builder
	field := func(k, v string) { fmt.Fprintf(&b, "%s %s\n", pal.bold(fmt.Sprintf("%-19s", k+":")), v) }
	now := time.Now()
	field("Name", obj.GetName())
	if r.namespaced {
		field("Namespace", obj.GetNamespace())
	}
	field("Kind", obj.GetKind())
	field("API Version", obj.GetAPIVersion())
	field("Labels", keyValues(obj.GetLabels()))
	annotations := obj.GetAnnotations()
	delete(annotations, lastAppliedAnnotation)
	field("Annotations", keyValues(annotations))
	field("UID", string(obj.GetUID()))
	field("Resource Version", obj.GetResourceVersion())
	if g := obj.GetGeneration(); g != 0 { // most built-in kinds have none
		field("Generation", fmt.Sprint(g))
	}
	ct := obj.GetCreationTimestamp()
	field("Created", fmt.Sprintf("%s (%s ago)", ct.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(ct.Time))))
	if dt := obj.GetDeletionTimestamp(); dt != nil {
		field("Deleting since", dt.UTC().Format(time.RFC3339))
	}
	if f := obj.GetFinalizers(); len(f) > 0 {
		field("Finalizers", strings.Join(f, ", "))
	}
	var owners []string
	for _, or := range obj.GetOwnerReferences() {
		s := or.Kind + "/" + or.Name
		if or.Controller != nil && *or.Controller {
			s += " (controller)"
		}
		owners = append(owners, s)
	}
	field("Owners", orNone(strings.Join(owners, ", ")))

	if spec, ok := obj.Object["spec"]; ok {
		section(&b, pal, "Spec", spec)
	}
	status, _ := obj.Object["status"].(map[string]any)
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if status != nil {
		rest := make(map[string]any, len(status))
		for k, v := range status {
			if k != "conditions" {
				rest[k] = v
			}
		}
		if len(rest) > 0 {
			section(&b, pal, "Status", rest)
		}
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Conditions:"))
	if len(conds) == 0 {
		b.WriteString("  <none>\n")
	} else {
		rows := [][]string{{"  TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}}
		for _, cv := range conds {
			m, _ := cv.(map[string]any)
			age := ""
			if ts, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"])); err == nil {
				age = duration.HumanDuration(now.Sub(ts))
			}
			rows = append(rows, []string{"  " + str(m["type"]), str(m["status"]), str(m["reason"]), age, str(m["message"])})
		}
		_ = writeAligned(&b, rows)
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Children:"))
	if len(children) == 0 {
		b.WriteString("  <none>\n")
	}
	for _, ch := range children {
		fmt.Fprintf(&b, "  %s\n", ch)
	}
	fmt.Fprintf(&b, "%s\n", pal.bold("Events:"))
	if len(events) == 0 {
		b.WriteString("  <none>\n")
	} else {
		rows := [][]string{{"  TYPE", "REASON", "AGE", "FROM", "MESSAGE"}}
		for _, e := range events {
			rows = append(rows, []string{"  " + str(e.Object["type"]), str(e.Object["reason"]), eventAge(e, now),
				str(nested(e.Object, "source", "component")), str(e.Object["message"])})
		}
		_ = writeAligned(&b, rows)
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

func section(b *strings.Builder, pal palette, title string, v any) {
	fmt.Fprintf(b, "%s\n", pal.bold(title+":"))
	y, err := yaml.Marshal(v)
	if err != nil {
		fmt.Fprintf(b, "  %v\n", v)
		return
	}
	for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
		fmt.Fprintf(b, "  %s\n", line)
	}
}

func keyValues(m map[string]string) string {
	return joinKeyValues(m, "\n                    ")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func nested(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// eventAge is the AGE column as kubectl describe prints it: how long ago
// the event was last seen, and for a repeated one how often and since when,
// "2m (x9 over 10m)".
func eventAge(e unstructured.Unstructured, now time.Time) string {
	last, first := eventLastSeen(e), eventFirstSeen(e)
	count, _, _ := unstructured.NestedInt64(e.Object, "count")
	if sc, ok, _ := unstructured.NestedInt64(e.Object, "series", "count"); ok && sc > count {
		count = sc
	}
	if count > 1 {
		return fmt.Sprintf("%s (x%d over %s)", duration.HumanDuration(now.Sub(last)), count, duration.HumanDuration(now.Sub(first)))
	}
	return duration.HumanDuration(now.Sub(last))
}

// eventFirstSeen and eventLastSeen read an Event's times, falling back as
// the fields an emitter sets allow.
func eventFirstSeen(e unstructured.Unstructured) time.Time {
	return eventTime(e, "firstTimestamp", "eventTime", "lastTimestamp")
}

func eventLastSeen(e unstructured.Unstructured) time.Time {
	if ts := eventTime(e, "series.lastObservedTime"); !ts.IsZero() {
		return ts
	}
	return eventTime(e, "lastTimestamp", "eventTime", "firstTimestamp")
}

func eventTime(e unstructured.Unstructured, keys ...string) time.Time {
	for _, k := range keys {
		v, _, _ := unstructured.NestedString(e.Object, strings.Split(k, ".")...)
		if v == "" {
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return ts
		}
	}
	return e.GetCreationTimestamp().Time
}

// findEvents lists the core v1 Events whose involvedObject is obj. A server
// that serves no events gives none.
func findEvents(ctx context.Context, c *client, obj *unstructured.Unstructured) []unstructured.Unstructured {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "events"}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	list, err := c.dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []unstructured.Unstructured
	for _, e := range list.Items {
		inv, _ := e.Object["involvedObject"].(map[string]any)
		if inv == nil {
			continue
		}
		if uid := str(inv["uid"]); uid != "" && uid == string(obj.GetUID()) ||
			uid == "" && str(inv["name"]) == obj.GetName() && str(inv["kind"]) == obj.GetKind() {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { // oldest first, by when last seen
		return eventLastSeen(out[i]).Before(eventLastSeen(out[j]))
	})
	return out
}

// findChildren lists the objects that name obj in their ownerReferences:
// for a namespaced owner, in its namespace; for a cluster-scoped one,
// everywhere.
func findChildren(ctx context.Context, c *client, obj *unstructured.Unstructured) []string {
	lists, _ := c.discovery.ServerPreferredResources()
	var mu sync.Mutex
	var out []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") || !hasVerb(ar.Verbs, "list") || ar.Name == "events" {
				continue
			}
			if obj.GetNamespace() != "" && !ar.Namespaced {
				continue // a namespaced owner has no cluster-scoped children
			}
			r := resource{gvr: gv.WithResource(ar.Name), gvk: gv.WithKind(ar.Kind), namespaced: ar.Namespaced}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				list, err := c.resourceInterface(r, obj.GetNamespace()).List(ctx, metav1.ListOptions{})
				if err != nil {
					return
				}
				for _, it := range list.Items {
					for _, or := range it.GetOwnerReferences() {
						if or.UID == obj.GetUID() {
							mu.Lock()
							out = append(out, r.objectName(it.GetName()))
							mu.Unlock()
						}
					}
				}
			})
		}
	}
	wg.Wait()
	sort.Strings(out)
	return out
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}
